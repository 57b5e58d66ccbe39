"""The job launcher resource: local subprocess or Slurm, with Dagster Pipes for what jobs report."""

import os
import shutil
import sys
from pathlib import Path
from typing import Any, Literal

from dagster import (
    AssetExecutionContext,
    ConfigurableResource,
    PipesFileContextInjector,
    PipesFileMessageReader,
    open_pipes_session,
)
from pydantic import Field

from pipeline.training.launchers import JobResult, JobSpec, LocalLauncher, SlurmLauncher

ROOT = Path(__file__).resolve().parents[1]


class JobLauncherResource(ConfigurableResource):
    """Where GPU jobs run: `local` (a subprocess here) or `slurm` (sbatch; GPUs via --gres)."""

    backend: Literal["local", "slurm"] = Field(default="local")
    partition: str | None = None
    account: str | None = None
    gpus: int = Field(default=0, description="GPUs per job (--gres=gpu:N on Slurm).")
    gpu_type: str | None = None
    cpus: int = 2
    mem_gb: int | None = None
    time_limit_min: int | None = None
    extra_directives: list[str] = Field(default_factory=list, description="Extra #SBATCH lines, e.g. '--qos=high'.")
    pending_timeout_s: float = Field(default=600, description="Fail if the job stays PENDING longer than this.")
    slurm_conf: str | None = Field(default=None, description="SLURM_CONF for the client commands.")
    jobcomp: str | None = Field(default=None, description="jobcomp/filetxt file, read when scontrol forgot the job.")
    workdir: str = Field(default="data/jobs", description="Shared directory for job scripts, logs and Pipes files.")
    python: str = Field(default=sys.executable, description="Python of the job environment (the harness, Pipes reports).")
    llamafactory_python: str | None = Field(
        default_factory=lambda: os.environ.get("ENVSIM_LLAMAFACTORY_PYTHON"),
        description="Python of the LLaMA-Factory environment (requirements-train.txt); its llamafactory-cli trains "
        "and serves. Default: $ENVSIM_LLAMAFACTORY_PYTHON, else .venv-train (./forge train-env) if present, else "
        "llamafactory-cli on PATH.")

    def llamafactory(self) -> tuple[str, str]:
        """(python, llamafactory-cli) of the LLaMA-Factory environment, or FileNotFoundError saying how to get one."""
        python = self.llamafactory_python
        if python is None and (ROOT / ".venv-train" / "bin" / "python").exists():
            python = str(ROOT / ".venv-train" / "bin" / "python")
        if python is not None:
            cli = Path(python).parent / "llamafactory-cli"
            if not cli.exists():
                raise FileNotFoundError(f"llamafactory-cli not found next to {python}: install requirements-train.txt "
                                        "in that environment (./forge train-env creates .venv-train)")
            return python, str(cli)
        found = shutil.which("llamafactory-cli")
        if found is None:
            raise FileNotFoundError("llamafactory-cli not found: set the launcher's llamafactory_python "
                                    "(ENVSIM_LLAMAFACTORY_PYTHON) or run ./forge train-env to create .venv-train")
        first = Path(found).read_bytes().split(b"\n", 1)[0].decode(errors="replace")
        return (first[2:].strip() if first.startswith("#!") else "python3"), found

    def job_workdir(self, context: AssetExecutionContext, name: str) -> Path:
        """The job's directory (scripts, log, Pipes files) on the shared filesystem."""
        return (Path(self.workdir) / f"{name}-{context.run.run_id[:8]}").resolve()

    def launcher(self) -> LocalLauncher | SlurmLauncher:
        if self.backend == "local":
            return LocalLauncher()
        env = {"SLURM_CONF": self.slurm_conf} if self.slurm_conf else {}
        return SlurmLauncher(self.pending_timeout_s, jobcomp=Path(self.jobcomp) if self.jobcomp else None, env=env)

    def run_with_pipes(
        self, context: AssetExecutionContext, name: str, script: str, extras: dict[str, Any], gpus: int | None = None,
        env: dict[str, str] | None = None,
    ) -> tuple[JobResult, list[Any]]:
        """Run a job script with the Pipes bootstrap (and ``env``) in its environment; returns (job, Pipes results)."""
        workdir = self.job_workdir(context, name)
        workdir.mkdir(parents=True, exist_ok=True)
        launcher = self.launcher()
        with open_pipes_session(
            context=context,
            context_injector=PipesFileContextInjector(str(workdir / "pipes-context.json")),
            message_reader=PipesFileMessageReader(str(workdir / "pipes-messages.jsonl")),
            extras=extras,
        ) as session:
            spec = JobSpec(
                name=name, script=f"cd {ROOT}\n{script}", workdir=workdir,
                env={**session.get_bootstrap_env_vars(), "PYTHONPATH": str(ROOT), **(env or {})},
                gpus=self.gpus if gpus is None else gpus, gpu_type=self.gpu_type, cpus=self.cpus, mem_gb=self.mem_gb,
                time_limit_min=self.time_limit_min, partition=self.partition, account=self.account,
                extra_directives=tuple(self.extra_directives),
            )
            result = launcher.run(spec, sink=context.log.info)
        return result, list(session.get_results())
