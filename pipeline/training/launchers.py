"""Job launchers: ``local`` (a subprocess here) and ``slurm`` (sbatch on a real cluster).

A :class:`JobSpec` is a bash script plus resources. Both launchers wait for the job, hand each new
log line to a callback, can be cancelled, and raise :class:`JobFailed` with the scheduler's reason and
the log tail when the job does not complete.
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

from pipeline.store.layout import safe_name

LogSink = Callable[[str], None]


@dataclass(frozen=True)
class JobSpec:
    name: str
    script: str  # bash, run in ``workdir``
    workdir: Path
    env: dict[str, str] = field(default_factory=dict)
    gpus: int = 0
    gpu_type: str | None = None
    cpus: int = 1
    mem_gb: int | None = None
    time_limit_min: int | None = None
    partition: str | None = None
    account: str | None = None
    extra_directives: tuple[str, ...] = ()

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


class _Follower:
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


class LocalLauncher:
    """Runs the job script with bash in a new process group on this machine."""

    def __init__(self, poll_s: float = 0.5) -> None:
        self.poll_s = poll_s
        self.proc: subprocess.Popen | None = None

    def run(self, spec: JobSpec, sink: LogSink = lambda _l: None, timeout_s: float | None = None) -> JobResult:
        spec.workdir.mkdir(parents=True, exist_ok=True)
        script = spec.workdir / f"{spec.name}.sh"
        script.write_text("#!/usr/bin/env bash\nset -euo pipefail\n" + spec.script)
        log = spec.workdir / f"{spec.name}.log"
        with log.open("w") as out:
            self.proc = subprocess.Popen(["bash", str(script)], cwd=spec.workdir, env={**os.environ, **spec.env},
                                         stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        follower = _Follower(log, sink)
        limit = timeout_s if timeout_s is not None else (spec.time_limit_min * 60 if spec.time_limit_min else None)
        start = time.monotonic()
        try:
            while self.proc.poll() is None:
                follower.poll()
                if limit is not None and time.monotonic() - start > limit:
                    self.cancel()
                    raise JobFailed(f"local job {spec.name} exceeded its time limit of {limit:g}s", "TIMEOUT", tail(log))
                time.sleep(self.poll_s)
        except BaseException:
            self.cancel()
            raise
        follower.poll()
        code = self.proc.returncode
        if code != 0:
            state = "CANCELLED" if code < 0 else "FAILED"
            raise JobFailed(f"local job {spec.name} {state.lower()} with exit code {code}", state, tail(log))
        return JobResult(str(self.proc.pid), "COMPLETED", 0, log)

    def cancel(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                os.killpg(self.proc.pid, signal.SIGKILL)


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
        follower = _Follower(log, sink)
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
