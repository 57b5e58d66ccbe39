"""Job launchers: ``local`` (a subprocess here, run by Dagster's ``PipesSubprocessClient`` in
``resources/launcher.py``) and ``slurm`` (sbatch on a real cluster, :class:`SlurmLauncher`).

A :class:`JobSpec` is a bash script plus resources. Both backends write the script and its log into the
job's directory, hand each new log line to a callback, can be cancelled, and raise :class:`JobFailed` with
the scheduler's reason and the log tail when the job does not complete. This module holds what is not
Dagster: the scripts, the log follower, the local job's command and its failure reasons, and Slurm.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from pipeline.core.fields import setting
from pipeline.store.layout import safe_name

LogSink = Callable[[str], None]


@dataclass(frozen=True)
class JobSpec:
    name: str
    script: str  # bash, run in ``workdir``
    workdir: Path
    env: dict[str, str] = field(default_factory=dict)
    gpus: int = setting(0, "GPUs per job (--gres=gpu:N on Slurm).")
    gpu_type: str | None = setting(None, "GPU type (--gres=gpu:<type>:N on Slurm).")
    cpus: int = setting(2, "CPUs per job (--cpus-per-task on Slurm).")
    mem_gb: int | None = setting(None, "Memory per job, GB (--mem on Slurm).")
    time_limit_min: int | None = setting(None, "Time limit of a job, minutes (local: the job is ended; Slurm: --time).")
    partition: str | None = setting(None, "Slurm partition.")
    account: str | None = setting(None, "Slurm account.")
    extra_directives: tuple[str, ...] = setting((), "Extra #SBATCH lines, e.g. '--qos=high'.")

    def __post_init__(self) -> None:
        safe_name(self.name, "job name")  # becomes <workdir>/<name>.sh / .log / .sbatch


@dataclass(frozen=True)
class JobResult:
    job_id: str
    state: str
    exit_code: int
    log: Path


class JobFailed(RuntimeError):
    def __init__(self, message: str, state: str = "FAILED", log_tail: str = "") -> None:
        super().__init__(f"{message}\n--- log tail ---\n{log_tail}" if log_tail else message)
        self.state = state
        self.log_tail = log_tail


def tail(path: Path, lines: int = 40) -> str:
    if not path.exists():
        return ""
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


class LogFollower:
    """Hands each complete new line of a growing log file to ``sink``, from where the last poll stopped."""

    def __init__(self, path: Path, sink: LogSink) -> None:
        self.path, self.sink, self.offset = path, sink, 0

    def poll(self) -> None:
        if not self.path.exists():
            return
        with self.path.open("rb") as fh:
            fh.seek(self.offset)
            data = fh.read()
        if not data:
            return
        text = data.decode(errors="replace")
        if not text.endswith("\n"):
            cut = text.rfind("\n") + 1
            text, data = text[:cut], data[:cut]
        self.offset += len(data)
        for line in text.splitlines():
            self.sink(line)


KILL_AFTER_S = 10  # SIGKILL to the whole job this long after SIGTERM / SIGINT


@dataclass(frozen=True)
class LocalJob:
    """A local job ready to start: ``command`` runs ``<workdir>/<name>.sh`` under coreutils ``timeout``, which
    puts the job in its own process group, sends the signals it receives (SIGINT when Dagster terminates the
    run, SIGTERM) to the whole group, enforces the time limit (SIGTERM, exit 124) and sends SIGKILL to the
    group ``KILL_AFTER_S`` after the first signal. The script writes its output to ``log`` and the group id
    to ``pgid_file`` (what :func:`kill_group` kills when the job fails or is interrupted)."""

    spec: JobSpec
    command: tuple[str, ...]
    log: Path
    pgid_file: Path
    limit_s: float | None

    def group(self) -> int | None:
        try:
            return int(self.pgid_file.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None

    def failure(self, code: int | None) -> JobFailed:
        """The :class:`JobFailed` for the exit status ``code`` of the command (None: unknown), with the log tail."""
        name, log_tail = self.spec.name, tail(self.log)
        if code == 124 and self.limit_s:
            return JobFailed(f"local job {name} exceeded its time limit of {self.limit_s:g}s", "TIMEOUT", log_tail)
        signum = -code if code is not None and code < 0 else (code - 128 if code is not None and code > 128 else None)
        if signum is not None:
            return JobFailed(f"local job {name} cancelled: killed by signal {signum} "
                             f"({signal.Signals(signum).name if signum in signal.valid_signals() else '?'})",
                             "CANCELLED", log_tail)
        return JobFailed(f"local job {name} failed with exit code {code if code is not None else 'unknown'}", "FAILED", log_tail)


def local_job(spec: JobSpec, timeout_s: float | None = None) -> LocalJob:
    """Write the job's script into its directory (output to ``<name>.log``) and the command that runs it.
    The time limit is ``timeout_s``, else the spec's ``time_limit_min``, else none."""
    spec.workdir.mkdir(parents=True, exist_ok=True)
    log, pgid_file = spec.workdir / f"{spec.name}.log", spec.workdir / f"{spec.name}.pgid"
    log.write_text("")
    pgid_file.unlink(missing_ok=True)
    script = spec.workdir / f"{spec.name}.sh"
    # $PPID is `timeout`, the leader of the job's process group
    script.write_text(f"#!/usr/bin/env bash\nset -euo pipefail\nexec >>{shlex.quote(str(log))} 2>&1\n"
                      f"echo $PPID > {shlex.quote(str(pgid_file))}\n" + spec.script)
    limit = timeout_s if timeout_s is not None else (spec.time_limit_min * 60 if spec.time_limit_min else None)
    command = ("timeout", f"--kill-after={KILL_AFTER_S}", f"{limit or 0:g}s", "bash", str(script))
    return LocalJob(spec, command, log, pgid_file, limit)


def kill_group(pgid: int | None) -> None:
    """SIGKILL what is left of a job's process group (a no-op when the group is gone)."""
    if pgid is None:
        return
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


_FINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL", "DEADLINE"}


class SlurmLauncher:
    """Submits with sbatch and follows the job with scontrol (falling back to the jobcomp file)."""

    def __init__(self, pending_timeout_s: float = 300, poll_s: float = 1.0, jobcomp: Path | None = None,
                 env: dict[str, str] | None = None) -> None:
        self.pending_timeout_s = pending_timeout_s
        self.poll_s = poll_s
        self.jobcomp = jobcomp
        self.env = {**os.environ, **(env or {})}
        self.job_id: str | None = None

    def script(self, spec: JobSpec, log: Path) -> str:
        lines = ["#!/usr/bin/env bash", f"#SBATCH --job-name={spec.name}", f"#SBATCH --output={log}",
                 f"#SBATCH --chdir={spec.workdir}", f"#SBATCH --cpus-per-task={spec.cpus}"]
        if spec.gpus:
            lines.append(f"#SBATCH --gres=gpu:{spec.gpu_type + ':' if spec.gpu_type else ''}{spec.gpus}")
        if spec.mem_gb:
            lines.append(f"#SBATCH --mem={spec.mem_gb}G")
        if spec.time_limit_min:
            lines.append(f"#SBATCH --time={spec.time_limit_min}")
        if spec.partition:
            lines.append(f"#SBATCH --partition={spec.partition}")
        if spec.account:
            lines.append(f"#SBATCH --account={spec.account}")
        lines += [f"#SBATCH {d}" for d in spec.extra_directives]
        exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in spec.env.items())
        return "\n".join(lines) + "\nset -euo pipefail\n" + exports + spec.script

    def _cmd(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(list(args), capture_output=True, text=True, env=self.env, timeout=60)

    def run(self, spec: JobSpec, sink: LogSink = lambda _l: None, timeout_s: float | None = None) -> JobResult:
        spec.workdir.mkdir(parents=True, exist_ok=True)
        log = spec.workdir / f"{spec.name}.log"
        log.unlink(missing_ok=True)
        path = spec.workdir / f"{spec.name}.sbatch"
        path.write_text(self.script(spec, log))
        sub = self._cmd("sbatch", "--parsable", str(path))
        if sub.returncode != 0:
            raise JobFailed(f"sbatch rejected job {spec.name}: {sub.stderr.strip() or sub.stdout.strip()}", "REJECTED")
        self.job_id = sub.stdout.strip().split(";")[0]
        follower = LogFollower(log, sink)
        started = time.monotonic()
        try:
            while True:
                follower.poll()
                state, exit_code, reason = self.status(self.job_id)
                if state in _FINAL:
                    break
                if state == "PENDING" and time.monotonic() - started > self.pending_timeout_s:
                    self.cancel()
                    raise JobFailed(f"slurm job {self.job_id} ({spec.name}) stayed PENDING for more than "
                                    f"{self.pending_timeout_s:g}s: {reason or 'no reason given'}", "PENDING")
                if timeout_s is not None and time.monotonic() - started > timeout_s:
                    self.cancel()
                    raise JobFailed(f"slurm job {self.job_id} ({spec.name}) exceeded the wait limit of {timeout_s:g}s", "TIMEOUT", tail(log))
                time.sleep(self.poll_s)
        except BaseException:
            if self.job_id and self.status(self.job_id)[0] not in _FINAL:
                self.cancel()
            raise
        follower.poll()
        if state != "COMPLETED" or exit_code != 0:
            raise JobFailed(f"slurm job {self.job_id} ({spec.name}) ended {state} with exit code {exit_code}"
                            + (f" ({reason})" if reason and reason != "None" else ""), state, tail(log))
        return JobResult(self.job_id, state, exit_code, log)

    def status(self, job_id: str) -> tuple[str, int, str]:
        """(JobState, exit code, Reason) from scontrol, else from the jobcomp file."""
        out = self._cmd("scontrol", "show", "job", "-o", job_id)
        if out.returncode == 0 and out.stdout.strip():
            fields = dict(re.findall(r"(\w+)=(\S*)", out.stdout))
            code = int((fields.get("ExitCode") or "0:0").split(":")[0])
            return fields.get("JobState", "UNKNOWN"), code, fields.get("Reason", "")
        if self.jobcomp and self.jobcomp.exists():
            for line in reversed(self.jobcomp.read_text().splitlines()):
                fields = dict(re.findall(r"(\w+)=(\S*)", line))
                if fields.get("JobId") == job_id:
                    return fields.get("JobState", "UNKNOWN"), int((fields.get("ExitCode") or "0:0").split(":")[0]), ""
        return "UNKNOWN", 0, "job not known to scontrol (and no jobcomp record)"

    def cancel(self) -> None:
        if self.job_id:
            self._cmd("scancel", self.job_id)
