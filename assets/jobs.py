"""Stage 6: training and evaluation as GPU jobs (local or Slurm), reporting through Dagster Pipes."""

import json
from pathlib import Path

import pandas as pd
import yaml
from dagster import AssetExecutionContext, Config, MaterializeResult, MetadataValue, asset
from dagster_duckdb import DuckDBResource
from pydantic import Field

from assets.evaluation import SimulatorConfig
from pipeline.evaluate import results
from pipeline.jobs.launchers import JobFailed
from pipeline.jobs.llamafactory import TrainSettings, sft_config, train_script
from pipeline.jobs.serve import vllm_prefix
from pipeline.report import md_table
from resources import DataStoreResource, JobLauncherResource


class TrainConfig(Config):
    model_name_or_path: str = "Qwen/Qwen3-4B-Base"
    finetuning_type: str = Field(default="full", description="full or lora")
    template: str = "qwen3"
    cutoff_len: int = 16384
    learning_rate: float = 1e-5
    num_train_epochs: float = 3.0
    per_device_train_batch_size: int = 1
    gradient_accumulation_steps: int = 16
    lora_rank: int = 16
    deepspeed: str | None = None
    gpus: int = Field(default=1, description="GPUs for the training job.")


@asset(group_name="jobs", deps=["sft_dataset"], kinds={"slurm", "python"})
def sft_training(context: AssetExecutionContext, config: TrainConfig, store: DataStoreResource,
                 launcher: JobLauncherResource) -> MaterializeResult:
    """Fine-tunes a simulator on the exported Balance2 mixture with LLaMA-Factory (full or LoRA),
    submitted through the job launcher; the checkpoint location and training metrics come back through
    Dagster Pipes. The job fails clearly when llamafactory-cli or a GPU is missing."""
    layout = store.layout()
    dataset_dir = (layout.root / "export" / "sft_mixture").resolve()
    if not (dataset_dir / "dataset_info.json").exists():
        raise FileNotFoundError(f"no exported SFT mixture at {dataset_dir}; materialize 'sft_dataset' first")
    out = (layout.root / "checkpoints" / f"sft-{context.run.run_id[:8]}").resolve()
    settings = TrainSettings(**{k: v for k, v in config.model_dump().items() if k != "gpus"})
    cfg = sft_config(settings, dataset_dir, out)
    cfg_path = out.with_suffix(".yaml")
    cfg_path.parent.mkdir(parents=True, exist_ok=True)
    cfg_path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    job, reported = launcher.run_with_pipes(context, "sft-train", train_script(cfg_path, out, launcher.python, "resources.job_entry"), {}, gpus=config.gpus)
    meta = reported[0].metadata if reported else {}
    return MaterializeResult(metadata={"job_id": job.job_id, "config": MetadataValue.path(str(cfg_path)),
                                       "checkpoint": str(meta.get("checkpoint", out)),
                                       "metrics": MetadataValue.json(getattr(meta.get("metrics"), "value", {}) or {})})


class EvalJobConfig(Config):
    split_version: str | None = None
    simulators: list[SimulatorConfig] = Field(
        default_factory=lambda: [SimulatorConfig(name="oracle", kind="oracle"), SimulatorConfig(name="no_change", kind="no_change")])
    serve_checkpoint: str | None = Field(default=None, description="Serve this checkpoint with vLLM inside the job.")
    served_model_name: str = "envsim-sim"
    gpus: int = Field(default=0, description="GPUs for the evaluation job (serving needs ≥ 1).")


@asset(group_name="jobs", deps=["benchmark_split"], pool="duckdb", kinds={"slurm", "duckdb"})
def simulator_eval_job(context: AssetExecutionContext, config: EvalJobConfig, store: DataStoreResource,
                       launcher: JobLauncherResource, duckdb: DuckDBResource) -> MaterializeResult:
    """Runs the evaluation harness as a job (optionally serving a checkpoint with vLLM inside it); the
    job reports CM/FM per stratum and its result files through Dagster Pipes, and the per-sample scores
    land in the same DuckDB tables as `simulator_eval`. Nothing is written for a failed job."""
    layout = store.layout()
    sims = [s.model_dump() for s in config.simulators]
    base_url, prefix = None, ""
    if config.serve_checkpoint:
        prefix = vllm_prefix(config.serve_checkpoint, config.served_model_name, gpus=max(1, config.gpus))
        base_url = "http://127.0.0.1:8011/v1"
    extras = {"data_root": str(layout.root.resolve()), "split_version": config.split_version, "simulators": sims, "base_url": base_url}
    try:
        job, reported = launcher.run_with_pipes(context, "eval", prefix + f"{launcher.python} -m resources.job_entry evaluate\n",
                                                extras, gpus=config.gpus)
    except JobFailed as exc:
        context.log.error(str(exc))
        raise
    if not reported:
        raise RuntimeError("the evaluation job finished without reporting through Dagster Pipes")
    report = json.loads(reported[0].metadata["report"].value)
    with duckdb.get_connection() as con:
        for rid, summary in report["runs"].items():
            results.load_run(con, Path(summary["results_path"]), rid)
        table = results.summary(con, list(report["runs"]))
    groups = pd.DataFrame([{"run": rid, **s["cm_by_group"]} for rid, s in report["runs"].items()])
    return MaterializeResult(metadata={
        "job_id": job.job_id, "split_version": report["split_version"],
        "summary": MetadataValue.md(md_table(table, index=False)),
        "cm_by_group_from_job": MetadataValue.md(md_table(groups, index=False)),
    })
