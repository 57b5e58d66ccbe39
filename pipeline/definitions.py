"""The Dagster code location (the only module of ``pipeline`` that imports dagster)."""

from dagster import AssetSelection, Definitions, define_asset_job, load_asset_checks_from_modules, load_assets_from_modules

from assets import collection, environments, labeling
from resources import DataStoreResource, EnvironmentSourcesResource, SandboxResource

_modules = [environments, collection, labeling]

envsim_main = define_asset_job(
    "envsim_main",
    selection=AssetSelection.all(),
    description="Build the dataset on the embedded default: catalog -> trajectories -> labeled steps (+ checks).",
)

defs = Definitions(
    assets=load_assets_from_modules(_modules),
    asset_checks=load_asset_checks_from_modules(_modules),
    jobs=[envsim_main],
    resources={
        "store": DataStoreResource(),
        "sources": EnvironmentSourcesResource(),
        "sandbox": SandboxResource(),
    },
)
