"""The Dagster code location (the only module of ``pipeline`` that imports dagster)."""

import os

from dagster import AssetSelection, Definitions, define_asset_job, load_asset_checks_from_modules, load_assets_from_modules
from dagster_duckdb import DuckDBResource

from assets import automation, collection, environments, evaluation, export, jobs, labeling, selection
from pipeline.store.layout import DataLayout
from resources import DataStoreResource, EnvironmentSourcesResource, HuggingFaceHubResource, JobLauncherResource, SandboxResource

_modules = [environments, collection, labeling, selection, export, evaluation]
# GPU job assets (training / evaluation jobs) appear when a launcher backend is chosen:
# ENVSIM_LAUNCHER=local or ENVSIM_LAUNCHER=slurm (+ ENVSIM_SLURM_PARTITION, SLURM_CONF, ...).
_launcher = os.environ.get("ENVSIM_LAUNCHER")
if _launcher:
    _modules.append(jobs)

envsim_main = define_asset_job(
    "envsim_main",
    selection=AssetSelection.all() - AssetSelection.groups("jobs"),
    description="Build everything on the embedded default: catalog -> trajectories -> labeled steps -> strata -> "
    "benchmark split -> SFT mixture -> Hugging Face datasets, baseline simulator scores (+ checks).",
)

defs = Definitions(
    assets=load_assets_from_modules(_modules),
    asset_checks=load_asset_checks_from_modules(_modules),
    jobs=[envsim_main, automation.regenerate_splits] + (
        [define_asset_job("gpu_jobs", selection=AssetSelection.groups("jobs"),
                          description="SFT training and evaluation as GPU jobs through the launcher (local or Slurm).")]
        if _launcher else []
    ),
    schedules=[automation.weekly_splits],
    sensors=[automation.splits_on_new_steps],
    resources={
        "store": DataStoreResource(),
        "sources": EnvironmentSourcesResource(),
        "sandbox": SandboxResource(),
        "duckdb": DuckDBResource(database=str(DataLayout.at(None).duckdb)),
        "hub": HuggingFaceHubResource(),
        "launcher": JobLauncherResource(
            backend=_launcher if _launcher in ("local", "slurm") else "local",
            partition=os.environ.get("ENVSIM_SLURM_PARTITION"),
            slurm_conf=os.environ.get("SLURM_CONF"),
            workdir=str(DataLayout.at(None).root / "jobs"),
        ),
    },
)
