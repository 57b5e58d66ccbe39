"""The Dagster code location (the only module of ``pipeline`` that imports dagster)."""

from dagster import AssetSelection, Definitions, define_asset_job, load_asset_checks_from_modules, load_assets_from_modules
from dagster_duckdb import DuckDBResource

from assets import automation, collection, environments, evaluation, export, labeling, selection
from pipeline.store.layout import DataLayout
from resources import DataStoreResource, EnvironmentSourcesResource, HuggingFaceHubResource, SandboxResource

_modules = [environments, collection, labeling, selection, export, evaluation]

envsim_main = define_asset_job(
    "envsim_main",
    selection=AssetSelection.all(),
    description="Build everything on the embedded default: catalog -> trajectories -> labeled steps -> strata -> "
    "benchmark split -> SFT mixture -> Hugging Face datasets, baseline simulator scores (+ checks).",
)

defs = Definitions(
    assets=load_assets_from_modules(_modules),
    asset_checks=load_asset_checks_from_modules(_modules),
    jobs=[envsim_main, automation.regenerate_splits],
    schedules=[automation.weekly_splits],
    sensors=[automation.splits_on_new_steps],
    resources={
        "store": DataStoreResource(),
        "sources": EnvironmentSourcesResource(),
        "sandbox": SandboxResource(),
        "duckdb": DuckDBResource(database=str(DataLayout.at(None).duckdb)),
        "hub": HuggingFaceHubResource(),
    },
)
