"""The Dagster code location: ``build_definitions(settings)``, loaded through ``@dg.definitions``.

``defs`` (what ``dg dev``, ``dg launch -m assets.definitions`` and workspace.yaml load) builds the
definitions of the process's settings (``pipeline.core.settings.settings()``: the ``ENVSIM_*``
variables, docs/settings.md) when Dagster loads the code location, never at import; ``./forge run`` builds
them once from its settings value (``assets.launch.definitions``). Any other shape is
``build_definitions(Settings(...))`` in the same process:

* ``shards`` partitions ``trajectories`` and ``labeled_steps`` (``envsim_main`` then holds the
  unpartitioned assets and the job ``collect_and_label`` the partitioned ones);
* ``executor`` (+ ``max_concurrent``, ``executor_config``) chooses the executor;
* ``launcher`` adds the ``training`` group and picks the launcher's backend (``resources.sets``);
* ``profile`` gives the resources' defaults; ``split_cron`` the ``weekly_splits`` schedule.
"""

from pipeline.core.settings import prepare_process

prepare_process()  # first, before anything imports pyarrow

import dagster as dg  # noqa: E402

from assets import (  # noqa: E402
    automation,
    collection,
    console,
    environments,
    envsimbench,
    evaluation,
    export,
    labeling,
    quality,
    selection,
    simulation,
    training,
)
from assets.executors import executor_for  # noqa: E402
from assets.partitions import PARTITIONED, partitioned, shards_partitions  # noqa: E402
from pipeline.core.settings import Settings, settings  # noqa: E402
from pipeline.store import duck  # noqa: E402
from resources.sets import resources_for  # noqa: E402

#: the asset modules of every shape; ``training`` joins them when a launcher is set
MODULES = (environments, collection, labeling, selection, quality, export, evaluation, simulation, envsimbench)

_NOT_MAIN = dg.AssetSelection.groups("training", "simulation", "envsimbench")


def _main_jobs(sharded: bool) -> list:
    """``envsim_main`` (and, partitioned, ``collect_and_label``)."""
    if not sharded:
        return [
            dg.define_asset_job(
                "envsim_main",
                selection=dg.AssetSelection.all() - _NOT_MAIN,
                description="Build everything on the embedded default: catalog -> trajectories "
                "-> labeled steps -> strata -> benchmark split -> SFT mixture -> "
                "Hugging Face datasets, baseline simulator scores (+ checks).",
            )
        ]
    split = dg.AssetSelection.assets(*PARTITIONED)
    return [
        dg.define_asset_job(
            "envsim_main",
            selection=dg.AssetSelection.all() - _NOT_MAIN - split,
            description="Everything unpartitioned (ENVSIM_SHARDS is set): the catalog, and on top of all "
            "partitions of the labeled steps: strata -> benchmark split -> SFT mixture -> Hugging Face datasets, "
            "baseline simulator scores (+ checks).",
        ),
        dg.define_asset_job(
            "collect_and_label",
            selection=split,
            description="One partition (environment source and shard) of trajectories -> labeled steps (+ checks); "
            "backfill it to run every partition, one run each.",
        ),
    ]


def build_definitions(current: Settings) -> dg.Definitions:
    """The definitions of the settings ``current``: assets, checks, jobs, schedule, sensors, executor and
    the resources, every choice taken from ``current`` (nothing read from the environment here)."""
    duck.configure(current)  # the process's DuckDB limits (every connection of the steps run in this process)
    modules = [*MODULES, training] if current.launcher else list(MODULES)
    partitions = shards_partitions(current.shards)
    jobs = [
        *_main_jobs(partitions is not None),
        automation.regenerate_splits,
        simulation.simulation,
        simulation.curriculum_refresh,
        dg.define_asset_job(
            "envsimbench_import_job",
            selection=dg.AssetSelection.groups("envsimbench"),
            description="Import the published EnvSimBench (benchmark / process data) as benchmark split versions.",
        ),
    ]
    if current.launcher:
        jobs.append(
            dg.define_asset_job(
                "training",
                selection=dg.AssetSelection.groups("training"),
                description="SFT training and evaluation as GPU jobs through the launcher (local or Slurm).",
            )
        )
    return dg.Definitions(
        assets=[partitioned(a, partitions) for a in dg.load_assets_from_modules(modules)],
        asset_checks=dg.load_asset_checks_from_modules(modules),
        executor=executor_for(current),
        jobs=jobs,
        schedules=[automation.weekly_splits(current.split_cron)],
        sensors=[automation.splits_on_new_steps, simulation.curriculum_on_new_eval],
        resources=resources_for(current),
        loggers={"console": console.console},  # a failure without its stack trace on the console (assets/console.py)
    )


@dg.definitions
def defs() -> dg.Definitions:
    """The code location: the definitions of the process's settings, built when Dagster loads it."""
    return build_definitions(settings())
