"""The job launcher resource: local subprocess or Slurm, with Dagster Pipes for what jobs report. Local jobs run
through Dagster's ``PipesSubprocessClient`` plus what it lacks: the job's script and log in its directory (the log
followed into the run's, its tail in the failure), a time limit, and the whole process group ended on failure or
termination (``pipeline.training.launchers.local_job``). Slurm jobs run through
:class:`~pipeline.training.launchers.SlurmLauncher` inside a Pipes session (docs/gpu-jobs.md "Slurm")."""

import re
import sys
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

from dagster import (
    AssetExecutionContext,
    ConfigurableResource,
    PipesFileContextInjector,
    PipesFileMessageReader,
    PipesSubprocessClient,
    open_pipes_session,
)
from pydantic import Field

from pipeline.core.progress import Log
from pipeline.store.layout import DataLayout
from pipeline.training.launchers import (
    KILL_AFTER_S,
    JobNeeds,
    JobResult,
    JobSpec,
    LogFollower,
    SlurmLauncher,
    find_llamafactory,
    hub_environment,
    kill_group,
    local_job,
)
from resources.config_from import config_from

ROOT = Path(__file__).resolve().parents[1]


class JobLauncherResource(
    config_from(JobSpec, exclude={"name", "script", "workdir", "env", "nodes", "requeue"}, base=ConfigurableResource)
):
    """Where GPU jobs run: `local` (a subprocess here) or `slurm` (sbatch; GPUs via --gres). The job's
    resources are the fields of ``JobSpec`` (what a job sets itself — its nodes, requeueing — excluded); the
    ones left unset are what each job needs (``JobNeeds``)."""

    backend: Literal["local", "slurm"] = Field(
        default="local", description="local (a subprocess here) or slurm (sbatch)."
    )
    pending_timeout_s: float = Field(default=600, description="Fail if the job stays PENDING longer than this.")
    slurm_conf: str | None = Field(default=None, description="SLURM_CONF for the client commands.")
    jobcomp: str | None = Field(default=None, description="jobcomp/filetxt file, read when scontrol forgot the job.")
    workdir: str = Field(
        default_factory=lambda: str(DataLayout.at(None).jobs),
        description="Shared directory for job scripts, logs and Pipes files (default: jobs/ under the data root).",
    )
    python: str = Field(
        default=sys.executable, description="Python of the job environment (the harness, Pipes reports)."
    )
    llamafactory_python: str | None = Field(
        default=None,
        description="Python of the LLaMA-Factory environment (requirements-train.txt); its llamafactory-cli trains "
        "and serves. The code location's default: $ENVSIM_LLAMAFACTORY_PYTHON; unset: .venv-train "
        "(./forge train-env) if present, else llamafactory-cli on PATH.",
    )
    serve_python: str | None = Field(
        default=None,
        description="Python of a separate serving environment (requirements-serve-vllm.txt: vLLM 0.11 needs "
        "transformers < 5, training pins 5.6); its llamafactory-cli serves checkpoints in the evaluation job. "
        "Default: the code location's $ENVSIM_SERVE_PYTHON; unset: the LLaMA-Factory environment.",
    )

    def llamafactory(self) -> tuple[str, str]:
        """(python, llamafactory-cli) of the LLaMA-Factory environment, or FileNotFoundError saying how to get one."""
        return find_llamafactory(self.llamafactory_python)

    def serving(self) -> tuple[str, str]:
        """(python, llamafactory-cli) that serves checkpoints: ``serve_python`` (a vLLM environment made by
        ``./forge serve-venv``) when set, else the LLaMA-Factory training environment."""
        return find_llamafactory(self.serve_python) if self.serve_python else self.llamafactory()

    def job_workdir(self, context: AssetExecutionContext, name: str) -> Path:
        """The job's directory (scripts, log, Pipes files) on the shared filesystem."""
        return (self.jobs_dir() / f"{name}-{context.run.run_id[:8]}").resolve()

    def jobs_dir(self) -> Path:
        """Where the jobs' directories are made (``workdir``)."""
        return Path(self.workdir)

    def job_env(self) -> dict[str, str]:
        """The Hugging Face cache settings every job gets (also the environment of the checks run before submission)."""
        return hub_environment(self.hf_home, self.hf_offline)

    def job_spec(
        self,
        workdir: Path,
        name: str,
        script: str,
        env: dict[str, str] | None = None,
        gpus: int | None = None,
        nodes: int = 1,
        requeue: bool = False,
        needs: JobNeeds | None = None,
    ) -> JobSpec:
        """The job ``name`` running ``script`` (in the repository, with it on ``PYTHONPATH``): this launcher's
        settings, where unset (``cpus``, ``mem_gb``, ``time_limit_min``) what the job ``needs``; ``gpus`` overrides
        the launcher's."""
        needs = needs or JobNeeds.for_gpus(self.gpus if gpus is None else gpus)
        return self.to_domain(
            name=name,
            script=f"cd {ROOT}\n{script}",
            workdir=workdir,
            env={"PYTHONPATH": str(ROOT), **(env or {})},
            gpus=self.gpus if gpus is None else gpus,
            nodes=nodes,
            requeue=requeue,
            cpus=self.cpus or needs.cpus,
            mem_gb=self.mem_gb or needs.mem_gb,
            time_limit_min=self.time_limit_min or needs.time_limit_min,
        )

    def run_with_pipes(
        self,
        context: AssetExecutionContext,
        name: str,
        script: str,
        extras: dict[str, Any],
        gpus: int | None = None,
        env: dict[str, str] | None = None,
        timeout_s: float | None = None,
        nodes: int = 1,
        requeue: bool = False,
        needs: JobNeeds | None = None,
        sink: Log | None = None,
    ) -> tuple[JobResult, list[Any]]:
        """Run a job script with the Pipes bootstrap (and ``env``) in its environment; returns (job, Pipes results).
        ``timeout_s`` overrides ``time_limit_min`` (local: the job's time limit; Slurm: how long to wait). Each line
        of the job's log goes to ``sink`` (default: the run's log) as it is written. See :meth:`job_spec`."""
        workdir = self.job_workdir(context, name)
        workdir.mkdir(parents=True, exist_ok=True)
        spec = self.job_spec(workdir, name, script, env, gpus, nodes, requeue, needs)
        injector = PipesFileContextInjector(str(workdir / "pipes-context.json"))
        reader = PipesFileMessageReader(str(workdir / "pipes-messages.jsonl"))
        sink = sink or context.log.info
        if self.backend == "local":
            return _run_local(context, spec, extras, injector, reader, timeout_s, sink)
        with open_pipes_session(
            context=context, context_injector=injector, message_reader=reader, extras=extras
        ) as session:
            spec = replace(spec, env={**session.get_bootstrap_env_vars(), **spec.env})
            slurm_env = {"SLURM_CONF": self.slurm_conf} if self.slurm_conf else {}
            jobcomp = Path(self.jobcomp) if self.jobcomp else None
            result = SlurmLauncher(self.pending_timeout_s, jobcomp=jobcomp, env=slurm_env).run(spec, sink, timeout_s)
        return result, list(session.get_results())


def _run_local(
    context: AssetExecutionContext,
    spec: JobSpec,
    extras: dict[str, Any],
    injector: PipesFileContextInjector,
    reader: PipesFileMessageReader,
    timeout_s: float | None,
    sink: Log,
) -> tuple[JobResult, list[Any]]:
    """The job under ``PipesSubprocessClient``, its log followed into ``sink`` while it runs."""
    job = local_job(spec, timeout_s)
    client = PipesSubprocessClient(
        context_injector=injector,
        message_reader=reader,
        forward_termination=True,
        termination_timeout_seconds=KILL_AFTER_S + 5,
    )
    follower, done = LogFollower(job.log, sink), threading.Event()

    def follow() -> None:
        while not done.wait(0.5):
            follower.poll()

    thread = threading.Thread(target=follow, name=f"follow-{spec.name}", daemon=True)
    thread.start()
    try:
        invocation = client.run(
            context=context, command=list(job.command), extras=extras, env=spec.environment(), cwd=str(spec.workdir)
        )
    except BaseException as exc:  # the job failed, or the run was terminated (the client forwarded SIGINT)
        kill_group(job.group())
        # PipesSubprocessClient's "External execution process failed with code N" (its error class is not exported)
        failed = re.search(r"process failed with code (-?\d+)", str(exc))
        if failed is None:
            raise
        raise job.failure(int(failed.group(1))) from None
    finally:
        done.set()
        thread.join()
        follower.poll()
    return JobResult(str(job.group() or ""), "COMPLETED", 0, job.log), list(invocation.get_results())
