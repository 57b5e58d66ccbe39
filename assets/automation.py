"""Schedules and sensors: regenerate splits weekly (new seed per version) and when steps change."""

from datetime import datetime

from dagster import (
    AssetKey,
    EventLogEntry,
    RunRequest,
    ScheduleDefinition,
    ScheduleEvaluationContext,
    SensorEvaluationContext,
    SkipReason,
    asset_sensor,
    schedule,
)

from assets.jobs import regenerate_splits
from pipeline.select.stratify import input_fingerprint
from pipeline.store.versions import BENCHMARK, MIXTURE, SplitStore
from resources import DataStoreResource
from resources.storage import DATA_ROOT_TAG, root_tag


def seed_config(benchmark_seed: int, mixture_seed: int | None = None) -> dict:
    """Run config of each split's seed (the mixture's defaults to the benchmark's): ``regenerate_splits``' runs and
    ``./forge run --seed N``."""
    mixture_seed = benchmark_seed if mixture_seed is None else mixture_seed
    return {
        "ops": {
            "benchmark_split": {"config": {"seed": benchmark_seed}},
            "sft_mixture": {"config": {"seed": mixture_seed}},
        }
    }


def week_seed(when: datetime) -> int:
    """The seed of the splits drawn in the ISO week of ``when``: its ISO year and week (``202648``), so every week's
    version gets a new one (``weekly_splits`` and ``./forge regenerate``)."""
    return int(when.strftime("%G%V"))


def weekly_splits(cron: str) -> ScheduleDefinition:
    """The schedule ``weekly_splits`` on ``cron`` (UTC; ``Settings.split_cron``, default Monday 04:00)."""

    @schedule(
        name="weekly_splits",
        job=regenerate_splits,
        cron_schedule=cron,
        execution_timezone="UTC",
        description="Weekly split regeneration; the seed is the ISO year+week, so every version gets a new one.",
    )
    def _weekly_splits(context: ScheduleEvaluationContext) -> RunRequest:
        seed = week_seed(context.scheduled_execution_time)
        return RunRequest(run_key=f"splits-seed-{seed}", run_config=seed_config(seed), tags={"split_seed": str(seed)})

    return _weekly_splits


@asset_sensor(
    asset_key=AssetKey("labeled_steps"),
    job=regenerate_splits,
    description="When the labeled steps change, redraw the splits with the current seed (a new input gives a new "
    "version); partitioned (ENVSIM_SHARDS): once every partition has been materialized.",
)
def splits_on_new_steps(
    context: SensorEvaluationContext, asset_event: EventLogEntry, store: DataStoreResource
) -> RunRequest | SkipReason:
    layout = store.layout()
    run = context.instance.get_run_by_id(asset_event.run_id) if asset_event.run_id else None
    event_root = run.tags.get(DATA_ROOT_TAG) if run else None
    if event_root and event_root != (root := root_tag(layout.root)):
        return SkipReason(
            f"labeled_steps were materialized under another data root ({event_root}), not this sensor's ({root})"
        )
    # the partitions of labeled_steps in the sensor's code location (None: unpartitioned, or no code location)
    steps = context.repository_def.assets_defs_by_key.get(AssetKey("labeled_steps")) if context.repository_def else None
    partitions = steps.partitions_def if steps is not None else None
    if partitions is not None:
        done = context.instance.get_materialized_partitions(AssetKey("labeled_steps"))
        missing = sorted(set(partitions.get_partition_keys()) - set(done))
        if missing:
            return SkipReason(f"labeled_steps partitions not materialized yet: {', '.join(missing)}")
    bench, mixture = SplitStore(layout, BENCHMARK), SplitStore(layout, MIXTURE)
    try:
        fingerprint = input_fingerprint(layout)
    except OSError as exc:
        return SkipReason(f"cannot read the labeled steps under {layout.root}: {exc}")
    if all(s.current() and s.manifest(s.current())["spec"].get("input") == fingerprint for s in (bench, mixture)):
        return SkipReason(
            f"labeled steps unchanged (input {fingerprint}): benchmark {bench.current()} and mixture "
            f"{mixture.current()} were drawn from them"
        )
    # each split keeps its own seed: a new input gives new versions, the seeds stay what they were
    seeds = (bench.current_seed() or 0, mixture.current_seed() or 0)
    return RunRequest(
        run_key=f"steps-{fingerprint}-{seeds[0]}-{seeds[1]}",
        run_config=seed_config(*seeds),
        tags={"split_seed": str(seeds[0]), "mixture_seed": str(seeds[1]), "steps_input": fingerprint},
    )
