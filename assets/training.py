"""Stage 6: training and evaluation as GPU jobs (local or Slurm), reporting through Dagster Pipes."""

import json
import shlex
from dataclasses import asdict
from pathlib import Path
from typing import Any

from dagster import AssetExecutionContext, DataVersion, MaterializeResult, asset
from dagster_duckdb import DuckDBResource
from duckdb import Error as DuckDBError
from pydantic import Field

from assets.evaluation import EvalConfig
from assets.metadata import materialize
from pipeline.core.progress import Log
from pipeline.evaluate.simulator_spec import EndpointSettings, SimulatorSpec
from pipeline.training import base_models, checkpoints, steps
from pipeline.training.eval_run import eval_extras, eval_facts, eval_script, record_eval
from pipeline.training.launchers import JobFailed
from pipeline.training.llamafactory import TrainSettings, launch_env, tracking_env, train_script
from pipeline.training.serve import SERVED_SIMULATOR_DEFAULTS, SERVED_SIMULATOR_FIELDS, ServeSpec
from pipeline.training.sft_run import plan_run, run_facts, run_manifest, stage_run
from resources import DataStoreResource, JobLauncherResource
from resources.config_from import config_from


class TrainConfig(config_from(TrainSettings, aliases={"extra": "extra_args"})):
    """LLaMA-Factory SFT settings (fields: ``TrainSettings``; ``extra`` is the config key ``extra_args``);
    the defaults are the published EnvSimBench recipe for the 4B simulator."""

    gpus: int = Field(
        default=1,
        description="GPUs per node for the training job; more than one in total: torchrun "
        "(FORCE_TORCHRUN) with ZeRO-3.",
    )
    nodes: int = Field(
        default=1,
        description="Nodes for the training job (Slurm: srun starts LLaMA-Factory's torchrun "
        "launcher on each, rendezvous from Slurm).",
    )


def _step_sink(context: AssetExecutionContext, duckdb: DuckDBResource, run_dir: Path) -> Log:
    """The job's log into the run's log; each checkpoint it announces registered in ``sft_checkpoint_steps`` as it is
    written (a database busy past the resource's retries gets it when the job ends)."""

    def sink(line: str) -> None:
        record = steps.parse_mark(line)
        if record is None:
            context.log.info(line)
            return
        context.log.info(
            f"checkpoint {record['checkpoint_version']} written (step {record['step']}, loss {record['loss']})"
        )
        try:
            with duckdb.get_connection() as con:
                checkpoints.record_steps(con, run_dir, [record], dagster_run_id=context.run.run_id)
        except DuckDBError as exc:
            context.log.warning(f"{record['checkpoint_version']} is registered when the job ends, not now: {exc}")

    return sink


def _register(
    context: AssetExecutionContext,
    duckdb: DuckDBResource,
    run_dir: Path,
    job_id: str | None,
    manifest: dict[str, Any] | None = None,
) -> int:
    """Record what the run in ``run_dir`` left (every complete checkpoint, and the published checkpoint's
    ``manifest``) in DuckDB; returns the number of intermediate checkpoints."""
    steps.scan(run_dir, announce=lambda _line: None)  # what the job had no time to record (ended, killed)
    with duckdb.get_connection() as con:
        if manifest is not None:
            checkpoints.record_checkpoint(con, manifest)
        return checkpoints.record_steps(con, run_dir, job_id=job_id, dagster_run_id=context.run.run_id)


@asset(group_name="training", deps=["sft_dataset"], kinds={"slurm", "python"})
def sft_training(
    context: AssetExecutionContext,
    config: TrainConfig,
    store: DataStoreResource,
    launcher: JobLauncherResource,
    duckdb: DuckDBResource,
) -> MaterializeResult:
    """Fine-tunes a simulator on the exported Balance2 mixture with LLaMA-Factory (`llamafactory-cli
    train`, full or LoRA, the published recipe by default), submitted through the job launcher. The
    config is checked by LLaMA-Factory's own argument parser before submission. The checkpoint version
    hashes (mixture version, settings, topology, base-model revision, library versions); a run of a version
    resumes from the latest checkpoint an earlier, unfinished run of it left. Every intermediate checkpoint is
    registered in `sft_checkpoint_steps` as it is written; the checkpoint, its metrics and the loss curve come
    back through Dagster Pipes, and the checkpoint is published under `checkpoints/<version>/` with its
    lineage (and in `sft_checkpoints`)."""
    python, cli = launcher.llamafactory()
    env = launcher.job_env()
    plan = plan_run(
        store.layout(), config.to_domain(), config.gpus, config.nodes, python, env, launcher.cpus, log=context.log.info
    )
    with checkpoints.training_lock(plan.root, plan.version):
        cfg_path, _, resume, accepted = stage_run(plan, python, env)
        context.log.info(accepted)
        staging = plan.staging
        report = f"{shlex.quote(launcher.python)} -m assets.training_entry train-report {shlex.quote(str(staging))}"
        try:
            job, reported = launcher.run_with_pipes(
                context,
                "sft-train",
                train_script(cli, cfg_path, staging, launcher.python, report, plan.gpus, plan.nodes),
                {"checkpoint_version": plan.version, "mixture_version": plan.mixture_version},
                gpus=plan.gpus,
                env={**launch_env(plan.gpus, plan.nodes), **tracking_env(plan.settings, staging)},
                nodes=plan.nodes,
                requeue=True,
                needs=plan.needs,
                sink=_step_sink(context, duckdb, staging),
            )
        except JobFailed as failed:
            try:
                kept = f"{_register(context, duckdb, staging, None)} checkpoints"
            except DuckDBError as exc:
                kept = f"its checkpoints (not registered in DuckDB: {exc})"
            context.log.error(
                f"{plan.version} stopped before it finished ({failed.state}); {kept} are in {staging}: "
                "materialize again with the same config to resume"
            )
            raise
        if not reported:
            raise RuntimeError("the training job finished without reporting through Dagster Pipes")
        report_data = json.loads(reported[0].metadata["report"].value)
        manifest = run_manifest(plan, report_data, resume, job.job_id, context.run.run_id, cfg_path)
        checkpoints.publish(staging, plan.final, manifest)
    registered = _register(context, duckdb, plan.final, job.job_id, {**manifest, "path": str(plan.final)})
    facts = run_facts(plan, report_data, manifest, registered)
    return materialize(context, facts, data_version=DataVersion(plan.version))


class ServeConfig(
    config_from(
        ServeSpec,
        SimulatorSpec,
        EndpointSettings,
        exclude={
            "model_name_or_path",
            "template",
            "served_name",
            "adapter_name_or_path",
            "llamafactory_cli",
            "llamafactory_python",
        },
        only={SimulatorSpec: SERVED_SIMULATOR_FIELDS, EndpointSettings: SERVED_SIMULATOR_FIELDS},
        defaults=SERVED_SIMULATOR_DEFAULTS,
    )
):
    """A checkpoint to serve inside the evaluation job with `llamafactory-cli api` (server fields:
    ``ServeSpec``; what the job resolves from the checkpoint is set here), and the requests to it."""

    checkpoint: str = Field(
        description="'latest', a checkpoint version (ckpt-…), <version>/step-N, a checkpoint directory "
        "or an embedded base model's name (smollm2-135m-instruct)."
    )
    served_model_name: str | None = Field(
        default=None,
        description="Default: the checkpoint version (a checkpoint trained elsewhere: <directory name>-<weights "
        "hash>). Results are cached by the checkpoint's weights id, never by this name.",
    )
    template: str | None = Field(default=None, description="Default: the template it was trained with.")
    base_model: str | None = Field(
        default=None, description="Base model of a LoRA checkpoint (default: from its manifest)."
    )

    def simulator(self) -> dict[str, Any]:
        """The served model's simulator fields (``SERVED_SIMULATOR_FIELDS``: ``SimulatorSpec``'s and its ``openai``
        kind's ``EndpointSettings``)."""
        return {name: getattr(self, name) for name in SERVED_SIMULATOR_FIELDS}


class EvalJobConfig(EvalConfig):
    """The evaluation (``EvalConfig``) as a job, optionally serving a checkpoint."""

    serve: ServeConfig | None = Field(default=None, description="Serve this checkpoint in the job and score it too.")
    max_samples: int | None = Field(
        default=None,
        description="Score only N samples, taken across the strata (each stratum's first in pick order, then its "
        "second, …).",
    )
    gpus: int = Field(default=0, description="GPUs for the evaluation job (vLLM serving needs ≥ 1).")


def _served(
    config: ServeConfig, root: Path, launcher: JobLauncherResource
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The job's serving extras and the checkpoint's manifest (None: trained elsewhere); the job itself derives the
    weights id (hashing the weight files, next to them) and from it the served name, unless ``served_model_name``."""
    python, cli = launcher.serving()
    if config.checkpoint in base_models.EMBEDDED:  # an embedded base model, by name (converted on first use)
        path, manifest = base_models.materialize(config.checkpoint, root, python).resolve(), None
    else:
        path, manifest = checkpoints.resolve(root, config.checkpoint)
    settings = (manifest or {}).get("settings", {})
    template = checkpoints.chat_template(path, manifest, config.template)
    if not template:
        raise ValueError(f"{path} has no envsim manifest: set serve.template (e.g. qwen)")
    lora = settings.get("finetuning_type") == "lora" or (not manifest and (path / "adapter_config.json").exists())
    base = config.base_model or settings.get("model_name_or_path")
    if base in base_models.EMBEDDED:  # a LoRA adapter on an embedded base model: its converted checkpoint
        base = str(base_models.materialize(base, root, python).resolve())
    if lora and not base:
        raise ValueError(f"{path} is a LoRA adapter: set serve.base_model")
    spec = asdict(
        config.to_domain(
            model_name_or_path=base if lora else str(path),
            adapter_name_or_path=str(path) if lora else None,
            template=template,
            served_name=config.served_model_name or "",
            llamafactory_cli=cli,
            llamafactory_python=python,
        )
    )
    return {"spec": spec, "simulator": config.simulator(), "checkpoint_path": str(path)}, manifest


@asset(group_name="training", deps=["benchmark_split", "sft_training"], pool="duckdb", kinds={"slurm", "duckdb"})
def simulator_eval_job(
    context: AssetExecutionContext,
    config: EvalJobConfig,
    store: DataStoreResource,
    launcher: JobLauncherResource,
    duckdb: DuckDBResource,
) -> MaterializeResult:
    """Runs the evaluation harness as a job (after `sft_training` when both run, as in the `training` job, so
    `serve: {checkpoint: latest}` serves what that run trained), optionally serving a checkpoint behind an
    OpenAI-compatible endpoint inside it (`llamafactory-cli api`: vLLM when installed, else Hugging Face) with a bounded
    readiness wait. The served checkpoint is scored under its weights id (its checkpoint version, else a hash
    of its weight files), so a re-run resumes only what those weights answered — another checkpoint served
    under the same name is scored in full. The job reports FM/CM per group and its result files through
    Dagster Pipes; the per-sample scores land in the same DuckDB tables as `simulator_eval`, and
    `eval_job_runs` records the served model, checkpoint, weights id, template and split version of each
    run. Nothing is written for a failed job."""
    root = store.layout().root.resolve()
    served, manifest = _served(config.serve, root, launcher) if config.serve else (None, None)
    workdir = launcher.job_workdir(context, "eval")
    sims = [s.model_dump() for s in config.simulators]
    extras = eval_extras(root, config.split_version, sims, served, workdir, config.max_samples)
    try:
        job, reported = launcher.run_with_pipes(
            context, "eval", eval_script(launcher.python, config.gpus), extras, gpus=config.gpus
        )
    except JobFailed as exc:
        context.log.error(str(exc))
        raise
    if not reported:
        raise RuntimeError("the evaluation job finished without reporting through Dagster Pipes")
    report = json.loads(reported[0].metadata["report"].value)
    with duckdb.get_connection() as con:
        table = record_eval(con, root, report, job.job_id, context.run.run_id)
    return materialize(context, eval_facts(report, job.job_id, table, manifest))
