"""Schedules and sensors: regenerate splits weekly (new seed per version) and when steps change."""

from dagster import (
    AssetKey,
    EventLogEntry,
    RunRequest,
    ScheduleEvaluationContext,
    SensorEvaluationContext,
    SkipReason,
    asset_sensor,
    define_asset_job,
    schedule,
)

from assets.partitions import SHARDS
from pipeline.core.settings import settings
from pipeline.store.versions import BENCHMARK, SplitStore
from resources import DataStoreResource
from resources.storage import DATA_ROOT_TAG, root_tag

regenerate_splits = define_asset_job(
    "regenerate_splits",
    selection=["step_strata", "benchmark_split", "sft_mixture"],
    description="Re-stratify the labeled steps and draw new benchmark / SFT split versions.",
)

SPLIT_CRON = settings().split_cron  # weekly, Monday 04:00 UTC (ENVSIM_SPLIT_CRON)


def _seed_config(seed: int) -> dict:
    return {"ops": {"benchmark_split": {"config": {"seed": seed}}, "sft_mixture": {"config": {"seed": seed}}}}


@schedule(job=regenerate_splits, cron_schedule=SPLIT_CRON, execution_timezone="UTC",
          description="Weekly split regeneration; the seed is the ISO year+week, so every version gets a new one.")
def weekly_splits(context: ScheduleEvaluationContext) -> RunRequest:
    seed = int(context.scheduled_execution_time.strftime("%G%V"))
    return RunRequest(run_key=f"splits-seed-{seed}", run_config=_seed_config(seed), tags={"split_seed": str(seed)})


@asset_sensor(asset_key=AssetKey("labeled_steps"), job=regenerate_splits,
              description="When the labeled steps change, redraw the splits with the current seed (a new input gives a new version); "
              "partitioned (ENVSIM_SHARDS): once every partition has been materialized.")
def splits_on_new_steps(context: SensorEvaluationContext, asset_event: EventLogEntry,
                        store: DataStoreResource) -> RunRequest | SkipReason:
    run = context.instance.get_run_by_id(asset_event.run_id) if asset_event.run_id else None
    event_root = (run.tags.get(DATA_ROOT_TAG) if run else None)
    if event_root and event_root != root_tag(store.layout().root):
        return SkipReason(f"labeled_steps were materialized under another data root ({event_root}), "
                          f"not this sensor's ({root_tag(store.layout().root)})")
    if SHARDS is not None:
        done = context.instance.get_materialized_partitions(AssetKey("labeled_steps"))
        missing = sorted(set(SHARDS.get_partition_keys()) - set(done))
        if missing:
            return SkipReason(f"labeled_steps partitions not materialized yet: {', '.join(missing)}")
    seed = SplitStore(store.layout(), BENCHMARK).current_seed() or 0  # under the store resource's data root
    return RunRequest(run_key=f"steps-{context.cursor}-{asset_event.timestamp}", run_config=_seed_config(seed), tags={"split_seed": str(seed)})
