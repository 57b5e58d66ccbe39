"""The Dagster code location: ``build_definitions(settings)``. ``defs`` (what ``dg dev``, ``dg launch -m
assets.definitions`` and workspace.yaml load) builds it from the process's settings (``ENVSIM_*``, docs/settings.md)
when Dagster loads the code location, never at import; ``./forge run`` builds it once from its own settings value.
The settings choose: ``shards`` partitions ``trajectories`` and ``labeled_steps`` (``envsim_main`` then holds the
unpartitioned assets, ``collect_and_label`` the partitioned ones: assets/jobs.py); ``executor`` (+ ``max_concurrent``,
``executor_config``) the executor; ``launcher`` adds the ``training`` group and picks the launcher's backend
(``resources.sets``); ``profile`` the resources' defaults; ``split_cron`` the ``weekly_splits`` schedule."""

import dagster as dg
from dagster._config.pythonic_config import infer_schema_from_config_class
from dagster._core.definitions.definition_config_schema import convert_user_facing_definition_config_schema

from assets import (
    automation,
    collection,
    environments,
    envsimbench,
    evaluation,
    export,
    jobs,
    labeling,
    quality,
    selection,
    simulation,
    training,
)
from assets.executors import executor_for
from assets.loggers import LOGGERS
from assets.partitions import partitioned, shards_partitions
from pipeline.core.settings import Settings, settings
from pipeline.store import duck
from resources.environments import source_sections
from resources.sets import resources_for

#: the asset modules of every shape; ``training`` joins them when a launcher is set
MODULES = (environments, collection, labeling, selection, quality, export, evaluation, simulation, envsimbench)


def config_sections() -> None:
    """A config section per source and simulator kind registered now (in code after import too); when a kind's
    changed, the assets' config classes (which nest ``SimulatorConfig``) are rebuilt, and their ops' schemas."""
    source_sections()
    if not evaluation.kind_sections():
        return
    for a in dg.load_assets_from_modules([*MODULES, training]):
        fn = a.op.compute_fn
        if fn.has_config_arg() and issubclass(config := fn.get_config_arg().annotation, dg.Config):
            config.model_rebuild(force=True)
            a.op._config_schema = convert_user_facing_definition_config_schema(infer_schema_from_config_class(config))


def build_definitions(current: Settings) -> dg.Definitions:
    """The definitions of the settings ``current``: assets, checks, jobs, schedule, sensors, executor and
    the resources, every choice taken from ``current`` (nothing read from the environment here)."""
    duck.configure(current)  # the process's DuckDB limits (every connection of the steps run in this process)
    config_sections()
    modules = [*MODULES, training] if current.launcher else list(MODULES)
    partitions = shards_partitions(current.shards)
    return dg.Definitions(
        assets=[partitioned(a, partitions) for a in dg.load_assets_from_modules(modules)],
        asset_checks=dg.load_asset_checks_from_modules(modules),
        executor=executor_for(current),
        jobs=jobs.jobs(partitions is not None, training=bool(current.launcher)),
        schedules=[automation.weekly_splits(current.split_cron)],
        sensors=[automation.splits_on_new_steps, simulation.curriculum_on_new_eval],
        resources=resources_for(current),
        loggers=LOGGERS,
    )


@dg.definitions
def defs() -> dg.Definitions:
    """The code location: the definitions of the process's settings, built when Dagster loads it."""
    return build_definitions(settings())
