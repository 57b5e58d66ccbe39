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
import shutil
import signal
import subprocess
import time
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.core.fields import setting
from pipeline.core.progress import Log
from pipeline.store.layout import safe_name

#: host memory a job asks for per GPU (and at least once) where the launcher leaves ``mem_gb`` unset
MEM_GB_PER_GPU = 32
#: the first line of a job that asks for GPUs: fail early (exit 3) where none is visible
GPU_CHECK = (
    'command -v nvidia-smi >/dev/null && nvidia-smi -L || { echo "no NVIDIA GPU visible to the job" >&2; exit 3; }\n'
)


@dataclass(frozen=True)
class JobNeeds:
    """What a job asks for where the launcher leaves ``cpus``, ``mem_gb`` or ``time_limit_min`` unset (the
    training job's: :func:`pipeline.training.llamafactory.train_needs`)."""

    cpus: int = 2
    mem_gb: int | None = None
    time_limit_min: int | None = None

    @classmethod
    def for_gpus(cls, gpus: int) -> JobNeeds:
        """Two CPUs and, with GPUs, ``MEM_GB_PER_GPU`` per GPU (a served model is loaded in host memory first)."""
        return cls(mem_gb=MEM_GB_PER_GPU * gpus if gpus else None)


def hub_environment(hf_home: str | None, offline: bool) -> dict[str, str]:
    """The Hugging Face variables of a job: ``HF_HOME`` (a shared model cache) and, offline, every library's
    offline switch (models and datasets then come from that cache only)."""
    env = {"HF_HOME": hf_home} if hf_home else {}
    if offline:
        env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    return env


@dataclass(frozen=True)
class JobSpec:
    """A job: a bash script with its environment, and what it asks the scheduler for (the fields with a
    description are the launcher resource's settings)."""

    name: str
    script: str  # bash, run in ``workdir``
    workdir: Path
    env: dict[str, str] = field(default_factory=dict)
    nodes: int = 1  # --nodes (one task per node); the training job's, set by its config
    requeue: bool = False  # Slurm --requeue: the job is started again after preemption or a node failure
    gpus: int = setting(0, "GPUs per node (--gres=gpu:N on Slurm).")
    gpu_type: str | None = setting(None, "GPU type (--gres=gpu:<type>:N on Slurm).")
    cpus: int | None = setting(
        None,
        "CPUs per task (--cpus-per-task on Slurm); unset: what the job needs (training: its "
        "preprocessing_num_workers, at least one per GPU; evaluation: 2).",
    )
    mem_gb: int | None = setting(
        None,
        "Memory per node, GB (--mem on Slurm); unset: what the job needs "
        f"({MEM_GB_PER_GPU} per GPU; training at least {MEM_GB_PER_GPU}).",
    )
    time_limit_min: int | None = setting(
        None,
        "Time limit of a job, minutes (local: the job is ended; Slurm: --time); "
        "unset: what the job needs (training: 24 h; evaluation: none).",
    )
    partition: str | None = setting(None, "Slurm partition.")
    account: str | None = setting(None, "Slurm account.")
    hf_home: str | None = setting(None, "HF_HOME of the jobs: a Hugging Face cache shared with the compute nodes.")
    hf_offline: bool = setting(
        False,
        "Jobs run offline (HF_HUB_OFFLINE=1, TRANSFORMERS_OFFLINE=1, HF_DATASETS_OFFLINE=1): "
        "models and datasets from hf_home only.",
    )
    extra_directives: tuple[str, ...] = setting((), "Extra #SBATCH lines, e.g. '--qos=high'.")

    def __post_init__(self) -> None:
        safe_name(self.name, "job name")  # becomes <workdir>/<name>.sh / .log / .sbatch
        if self.nodes < 1:
            raise ValueError(f"job {self.name} asks for {self.nodes} nodes: nodes must be at least 1")

    def environment(self) -> dict[str, str]:
        """The job's environment: the Hugging Face cache settings, then ``env``."""
        return {**hub_environment(self.hf_home, self.hf_offline), **self.env}


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

    def __init__(self, path: Path, sink: Log) -> None:
        self.path, self.sink, self.offset = path, sink, 0

    def poll(self) -> None:
        if not self.path.exists():
            return
        if self.path.stat().st_size < self.offset:  # truncated (a requeued job's log opened anew): read it again
            self.offset = 0
        with self.path.open("rb") as fh:
            fh.seek(self.offset)
            data = fh.read()
        data = data[: data.rfind(b"\n") + 1]  # complete lines only, cut in bytes (a character may be several)
        self.offset += len(data)
        for line in data.decode(errors="replace").splitlines():
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
            return JobFailed(
                f"local job {name} cancelled: killed by signal {signum} "
                f"({signal.Signals(signum).name if signum in signal.valid_signals() else '?'})",
                "CANCELLED",
                log_tail,
            )
        return JobFailed(
            f"local job {name} failed with exit code {code if code is not None else 'unknown'}", "FAILED", log_tail
        )


def local_job(spec: JobSpec, timeout_s: float | None = None) -> LocalJob:
    """Write the job's script into its directory (output to ``<name>.log``) and the command that runs it.
    The time limit is ``timeout_s``, else the spec's ``time_limit_min``, else none."""
    if spec.nodes > 1:
        raise ValueError("the local launcher runs a job on this machine only: set nodes: 1 or use the slurm backend")
    spec.workdir.mkdir(parents=True, exist_ok=True)
    log, pgid_file = spec.workdir / f"{spec.name}.log", spec.workdir / f"{spec.name}.pgid"
    log.write_text("")
    pgid_file.unlink(missing_ok=True)
    script = spec.workdir / f"{spec.name}.sh"
    # $PPID is `timeout`, the leader of the job's process group
    script.write_text(
        f"#!/usr/bin/env bash\nset -euo pipefail\nexec >>{shlex.quote(str(log))} 2>&1\n"
        f"echo $PPID > {shlex.quote(str(pgid_file))}\n" + spec.script
    )
    limit = timeout_s if timeout_s is not None else (spec.time_limit_min * 60 if spec.time_limit_min else None)
    command = ("timeout", f"--kill-after={KILL_AFTER_S}", f"{limit or 0:g}s", "bash", str(script))
    return LocalJob(spec, command, log, pgid_file, limit)


def kill_group(pgid: int | None) -> None:
    """SIGKILL what is left of a job's process group (a no-op when the group is gone)."""
    if pgid is None:
        return
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


#: the states a job ends in
_FINAL = set("COMPLETED FAILED CANCELLED TIMEOUT NODE_FAIL OUT_OF_MEMORY PREEMPTED BOOT_FAIL DEADLINE".split())
#: states after which Slurm starts a job with --requeue again (it then shows PENDING, Restarts=N+1)
_REQUEUED = {"PREEMPTED", "NODE_FAIL"}
#: how long a requeuable job may stay PREEMPTED / NODE_FAIL before that counts as its end (no requeue came)
REQUEUE_GRACE_S = 300


class SlurmLauncher:
    """Submits with sbatch and follows the job with scontrol (falling back to the jobcomp file)."""

    def __init__(
        self,
        pending_timeout_s: float = 300,
        poll_s: float = 1.0,
        jobcomp: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.pending_timeout_s = pending_timeout_s
        self.poll_s = poll_s
        self.jobcomp = jobcomp
        self.env = {**os.environ, **(env or {})}
        self.job_id: str | None = None

    def script(self, spec: JobSpec, log: Path) -> str:
        """The sbatch file: every request as an ``#SBATCH`` line, then the environment and the script. The log is
        opened for appending, so a requeued job's second run follows its first."""
        lines = [
            "#!/usr/bin/env bash",
            f"#SBATCH --job-name={spec.name}",
            f"#SBATCH --output={log}",
            "#SBATCH --open-mode=append",
            f"#SBATCH --chdir={spec.workdir}",
        ]
        if spec.nodes > 1:
            lines += [f"#SBATCH --nodes={spec.nodes}", "#SBATCH --ntasks-per-node=1"]
        gpu_type = f"{spec.gpu_type}:" if spec.gpu_type else ""
        requests = {
            f"--cpus-per-task={spec.cpus}": spec.cpus,
            "--requeue": spec.requeue,
            f"--gres=gpu:{gpu_type}{spec.gpus}": spec.gpus,
            f"--mem={spec.mem_gb}G": spec.mem_gb,
            f"--time={spec.time_limit_min}": spec.time_limit_min,
            f"--partition={spec.partition}": spec.partition,
            f"--account={spec.account}": spec.account,
        }
        lines += [f"#SBATCH {d}" for d, wanted in requests.items() if wanted]
        lines += [f"#SBATCH {d}" for d in spec.extra_directives]
        exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in spec.environment().items())
        return "\n".join(lines) + "\nset -euo pipefail\n" + exports + spec.script

    def _cmd(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(list(args), capture_output=True, text=True, env=self.env, timeout=60)

    def run(self, spec: JobSpec, sink: Log = lambda _l: None, timeout_s: float | None = None) -> JobResult:
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
        # once the job has run, a PENDING is a requeue waiting in the queue, not a request that cannot start
        ran = False
        requeued_since: float | None = None
        try:
            while True:
                follower.poll()
                state, exit_code, reason = self.status(self.job_id)
                ran = ran or state not in ("PENDING", "UNKNOWN")
                if spec.requeue and state in _REQUEUED:
                    requeued_since = requeued_since or time.monotonic()
                    if time.monotonic() - requeued_since <= REQUEUE_GRACE_S:
                        time.sleep(self.poll_s)
                        continue
                else:
                    requeued_since = None
                if state in _FINAL:
                    break
                if state == "PENDING" and not ran and time.monotonic() - started > self.pending_timeout_s:
                    self.cancel()
                    raise JobFailed(
                        f"slurm job {self.job_id} ({spec.name}) stayed PENDING for more than "
                        f"{self.pending_timeout_s:g}s: {reason or 'no reason given'}",
                        "PENDING",
                    )
                if timeout_s is not None and time.monotonic() - started > timeout_s:
                    self.cancel()
                    raise JobFailed(
                        f"slurm job {self.job_id} ({spec.name}) exceeded the wait limit of {timeout_s:g}s",
                        "TIMEOUT",
                        tail(log),
                    )
                time.sleep(self.poll_s)
        except BaseException:
            if self.job_id and self.status(self.job_id)[0] not in _FINAL:
                self.cancel()
            raise
        follower.poll()
        if state != "COMPLETED" or exit_code != 0:
            raise JobFailed(
                f"slurm job {self.job_id} ({spec.name}) ended {state} with exit code {exit_code}"
                + (f" ({reason})" if reason and reason != "None" else ""),
                state,
                tail(log),
            )
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


#: the project's root: ``./forge train-env`` creates the LLaMA-Factory environment ``.venv-train`` there
PROJECT_ROOT = Path(__file__).resolve().parents[2]


def find_llamafactory(python: str | None = None) -> tuple[str, str]:
    """(python, llamafactory-cli) of the LLaMA-Factory environment: ``python`` when given (the caller's
    ``Settings.llamafactory_python``, ``$ENVSIM_LLAMAFACTORY_PYTHON``), else ``.venv-train`` (``./forge train-env``)
    if present, else ``llamafactory-cli`` on ``PATH``; FileNotFoundError saying how to get one."""
    python = python or None
    if python is None and (PROJECT_ROOT / ".venv-train" / "bin" / "python").exists():
        python = str(PROJECT_ROOT / ".venv-train" / "bin" / "python")
    if python is not None:
        cli = Path(python).parent / "llamafactory-cli"
        if not cli.exists():
            raise FileNotFoundError(
                f"llamafactory-cli not found next to {python}: install requirements-train.txt "
                "in that environment (./forge train-env creates .venv-train)"
            )
        return python, str(cli)
    found = shutil.which("llamafactory-cli")
    if found is None:
        raise FileNotFoundError(
            "llamafactory-cli not found: set the launcher's llamafactory_python "
            "(ENVSIM_LLAMAFACTORY_PYTHON) or run ./forge train-env to create .venv-train"
        )
    first = Path(found).read_bytes().split(b"\n", 1)[0].decode(errors="replace")
    return (first[2:].strip() if first.startswith("#!") else "python3"), found
