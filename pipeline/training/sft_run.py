"""An SFT training run before and after its GPU job (no Dagster here; ``assets/training.py`` submits the job
and reports through Dagster Pipes): :func:`plan_run` finds the exported mixture and names the checkpoint
version, :func:`stage_run` writes the LLaMA-Factory config into the staging directory and has LLaMA-Factory
check it, and :func:`run_manifest` / :func:`run_facts` say what the finished run published."""

from __future__ import annotations

import base64
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pipeline.core.progress import Log
from pipeline.report.tables import Facts, Markdown
from pipeline.store.layout import DataLayout
from pipeline.store.versions import MIXTURE
from pipeline.training import base_models, checkpoints, steps
from pipeline.training.launchers import JobNeeds
from pipeline.training.llamafactory import (
    ZERO3_FILE,
    InvalidTrainingArguments,
    TrainSettings,
    base_model_revision,
    check_dataset,
    checkpoint_version,
    library_versions,
    loss_plot,
    sft_config,
    train_needs,
    validate,
    write_config,
)


@dataclass(frozen=True)
class RunPlan:
    """What a training run trains, on what, and where its checkpoint goes."""

    root: Path  # the data root, resolved
    dataset_dir: Path  # the exported mixture version
    mixture_version: str
    named: TrainSettings  # as configured
    settings: TrainSettings  # as trained (an embedded model: its converted checkpoint)
    origin: dict[str, Any] | None  # an embedded model's GGUF origin
    revision: str  # the base model's revision
    versions: dict[str, str]  # library versions of the training environment
    version: str  # the checkpoint version
    gpus: int
    nodes: int
    needs: JobNeeds
    workers: int

    @property
    def final(self) -> Path:
        return DataLayout.at(self.root).checkpoints / self.version

    @property
    def staging(self) -> Path:
        return checkpoints.staging_dir(self.root, self.version)


def plan_run(
    layout: DataLayout,
    named: TrainSettings,
    gpus: int,
    nodes: int,
    python: str,
    env: dict[str, str],
    cpus: int | None,
    log: Log = lambda _m: None,
) -> RunPlan:
    """The run of ``named`` on the SFT mixture ``sft_dataset`` exported last (recorded in ``layout``), with the
    LLaMA-Factory environment ``python`` / ``env``; FileNotFoundError when no mixture was exported."""
    exported = layout.recorded_export(MIXTURE)  # where sft_dataset recorded it (ExportConfig.directory or export/)
    if exported is None:
        raise FileNotFoundError(
            f"no exported SFT mixture recorded under {layout.root} ({layout.export_record.name}); "
            "materialize 'sft_dataset' first"
        )
    dataset_dir = exported.resolve()  # the version exported last
    if not (dataset_dir / "dataset_info.json").exists():
        raise FileNotFoundError(f"no exported SFT mixture at {dataset_dir}; materialize 'sft_dataset' first")
    _, mixture_version = checkpoints.export_version(dataset_dir)
    check_dataset(dataset_dir, named.dataset)
    root = layout.root.resolve()
    # an embedded model's name (docs/evaluation.md "A real model") trains its converted checkpoint; its identity stays
    # the name and the GGUF's hash, so moving the data root does not change the checkpoint version
    settings, origin = base_models.for_training(named, root, python, log=log)
    revision = f"gguf-sha256:{origin['gguf_sha256']}" if origin else base_model_revision(named)
    versions = library_versions(python, env)
    version = checkpoint_version(mixture_version, named, gpus, nodes, revision=revision, versions=versions)
    needs, workers = train_needs(settings, gpus, cpus)
    return RunPlan(
        root,
        dataset_dir,
        mixture_version,
        named,
        settings,
        origin,
        revision,
        versions,
        version,
        gpus,
        nodes,
        needs,
        workers,
    )


def stage_run(plan: RunPlan, python: str, env: dict[str, str]) -> tuple[Path, str, Path | None, str]:
    """Write the run's LLaMA-Factory config into its staging directory and have LLaMA-Factory check it
    (InvalidTrainingArguments: the config is refused; a staging directory made for it is removed). Returns the
    config file, what is left to the job's hardware, the checkpoint an earlier run left to resume from, and the
    line to log. Run it under ``checkpoints.training_lock``."""
    fresh = not plan.staging.exists()
    cfg = sft_config(
        plan.settings,
        plan.dataset_dir,
        plan.staging,
        gpus=plan.gpus,
        nodes=plan.nodes,
        deepspeed_path=plan.staging / ZERO3_FILE,
        workers=plan.workers,
        run_name=plan.version,
    )
    cfg_path = write_config(cfg, plan.staging / "llamafactory_train.yaml", zero3_path=plan.staging / ZERO3_FILE)
    steps.start_run(plan.staging, plan.version, plan.mixture_version)
    try:
        deferred = validate(cfg, python, env=env)
    except InvalidTrainingArguments:
        if fresh:
            shutil.rmtree(plan.staging, ignore_errors=True)
        raise
    resume = steps.resume_point(plan.staging)
    line = (
        f"LLaMA-Factory accepted the config of {plan.version} (mixture {plan.mixture_version})"
        + (f"; left to the job's hardware: {deferred}" if deferred else "")
        + (f"; resuming the earlier run from {resume.name}" if resume else "")
    )
    return cfg_path, deferred, resume, line


def run_manifest(
    plan: RunPlan, report: dict[str, Any], resume: Path | None, job_id: str, dagster_run_id: str, cfg_path: Path
) -> dict[str, Any]:
    """The manifest the checkpoint is published with (its lineage), from the job's ``report``."""
    return {
        "checkpoint_version": plan.version,
        "mixture_version": plan.mixture_version,
        "settings": asdict(plan.named),
        "model_path": plan.settings.model_name_or_path,
        "template": plan.settings.template,
        "gpus": plan.gpus,
        "nodes": plan.nodes,
        "base_model_revision": plan.revision,
        "library_versions": plan.versions,
        "base_model": plan.origin,
        "metrics": report["metrics"],
        "saved_checkpoints": report["saved_checkpoints"],
        "resumed_from": resume.name if resume else None,
        "job_id": job_id,
        "dagster_run_id": dagster_run_id,
        "config_file": cfg_path.name,
    }


def run_facts(plan: RunPlan, report: dict[str, Any], manifest: dict[str, Any], registered: int) -> Facts:
    """What the ``sft_training`` asset reports of the published run (the loss curve drawn beside the checkpoint)."""
    curve = report["loss_curve"]
    title = f"{plan.version} on {plan.mixture_version}"
    plot = loss_plot(curve, plan.final / "loss_curve.png", title) if curve else None
    throughput = [r["tokens_per_s"] for r in curve if r.get("tokens_per_s")]
    values: dict[str, Any] = {
        "checkpoint_version": plan.version,
        "mixture_version": plan.mixture_version,
        "base_model_revision": plan.revision,
        "library_versions": plan.versions,
        "checkpoint": plan.final,
        "config": plan.final / manifest["config_file"],
        "job_id": manifest["job_id"],
        "metrics": report["metrics"],
        "final_loss": curve[-1]["loss"] if curve else None,
        "tokens_per_s": round(sum(throughput) / len(throughput), 1) if throughput else None,
        "saved_checkpoints": ", ".join(report["saved_checkpoints"]) or "none",
        "registered_steps": registered,
        "resumed_from": manifest["resumed_from"],
        "loss_curve": Markdown(
            f"![training loss](data:image/png;base64,{base64.b64encode(plot).decode()})"
            if plot
            else "no loss was logged (fewer steps than logging_steps)"
        ),
    }
    return Facts({k: v for k, v in values.items() if v is not None})
