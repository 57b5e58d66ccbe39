"""The jobs of the code location, declared once: their names (``MAIN_JOB``: what ``./forge run`` launches) and
definitions, which ``build_definitions`` (assets/definitions.py) takes by the settings' shape, the schedule and
sensors (assets/automation.py, assets/simulation.py) target, and the CLI (cli/) launches and reports on by name."""

import dagster as dg

from assets.partitions import PARTITIONED

#: the main job ``./forge run`` launches
MAIN_JOB = "envsim_main"
#: the job of one partition of collection + labeling (``ENVSIM_SHARDS``), one run per partition
COLLECT_AND_LABEL = "collect_and_label"

_NOT_MAIN = dg.AssetSelection.groups("training", "simulation", "envsimbench")

regenerate_splits = dg.define_asset_job(
    "regenerate_splits",
    selection=["step_strata", "benchmark_split", "sft_mixture", "benchmark_dataset", "sft_dataset", "simulator_eval"],
    description="Re-stratify the labeled steps, draw new benchmark / SFT split versions, export each version "
    "(export/<kind>/<version>/, current moved to it) and re-run the configured simulator evaluations on it.",
)
simulation = dg.define_asset_job(
    "simulation",
    selection=["simulated_rollouts", "rollout_sft_dataset"],
    description="Simulated rollouts (default: oracle and no_change over recorded actions) and their SFT export.",
)
curriculum_refresh = dg.define_asset_job(
    "curriculum_refresh",
    selection=["curriculum_mixture"],
    description="Draw a new α-curriculum mixture from the latest evaluation results.",
)


def _main_jobs(sharded: bool) -> list:
    """``envsim_main`` (and, partitioned, ``collect_and_label``)."""
    if not sharded:
        return [
            dg.define_asset_job(
                MAIN_JOB,
                selection=dg.AssetSelection.all() - _NOT_MAIN,
                description="Build everything on the embedded default: catalog -> trajectories "
                "-> labeled steps -> strata -> benchmark split -> SFT mixture -> "
                "Hugging Face datasets, baseline simulator scores (+ checks).",
            )
        ]
    split = dg.AssetSelection.assets(*PARTITIONED)
    return [
        dg.define_asset_job(
            MAIN_JOB,
            selection=dg.AssetSelection.all() - _NOT_MAIN - split,
            description="Everything unpartitioned (ENVSIM_SHARDS is set): the catalog, and on top of all "
            "partitions of the labeled steps: strata -> benchmark split -> SFT mixture -> Hugging Face datasets, "
            "baseline simulator scores (+ checks).",
        ),
        dg.define_asset_job(
            COLLECT_AND_LABEL,
            selection=split,
            description="One partition (environment source and shard) of trajectories -> labeled steps (+ checks); "
            "backfill it to run every partition, one run each.",
        ),
    ]


def jobs(sharded: bool, training: bool) -> list:
    """Every job of one shape of the code location: ``sharded`` (``ENVSIM_SHARDS``: the partitioned main jobs),
    ``training`` (a launcher is set: the ``training`` job of that group)."""
    found = [
        *_main_jobs(sharded),
        regenerate_splits,
        simulation,
        curriculum_refresh,
        dg.define_asset_job(
            "envsimbench_import_job",
            selection=dg.AssetSelection.groups("envsimbench"),
            description="Import the published EnvSimBench (benchmark / process data) as benchmark split versions.",
        ),
    ]
    if training:
        found.append(
            dg.define_asset_job(
                "training",
                selection=dg.AssetSelection.groups("training"),
                description="SFT training and evaluation as GPU jobs through the launcher (local or Slurm).",
            )
        )
    return found
