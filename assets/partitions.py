"""Opt-in partitioning of collection and labeling: ``ENVSIM_SHARDS=N`` (read when the code location loads).

Unset, ``trajectories`` and ``labeled_steps`` are unpartitioned (the default run). Set, both get the
static partitions ``<source>-<i>`` (bfcl / builtin / envscaler × i < N; see
``pipeline.collect.shards``) and a backfill runs one run per partition; everything downstream stays
unpartitioned and reads all partitions.
"""

from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetExecutionContext,
    MetadataValue,
    StaticPartitionsDefinition,
    asset_check,
)

from pipeline.collect.shards import Shard, partition_keys, shard_count
from pipeline.store.layout import DataLayout
from resources import DataStoreResource

SHARDS_COUNT = shard_count()
SHARDS = StaticPartitionsDefinition(partition_keys(SHARDS_COUNT)) if SHARDS_COUNT else None


def partition_of(context: AssetExecutionContext | AssetCheckExecutionContext) -> str | None:
    op = context.op_execution_context
    return op.partition_key if SHARDS is not None and op.has_partition_key else None


def shard_of(context: AssetExecutionContext) -> Shard | None:
    key = partition_of(context)
    return Shard.parse(key, SHARDS_COUNT) if key is not None else None


def scoped(layout: DataLayout, context: AssetExecutionContext | AssetCheckExecutionContext) -> DataLayout:
    """The partition's view of the data root in a partitioned run, else the whole root."""
    return layout.for_partition(partition_of(context))


@asset_check(asset="labeled_steps", name="step_table_expectations",
             description="great-expectations on the partition's steps: schema and nulls, outcomes in the closed set, "
             "unique step ids, |Δ| equals the Δ list length (an empty partition has nothing to check).")
def partition_step_table_expectations(context: AssetCheckExecutionContext, store: DataStoreResource) -> AssetCheckResult:
    """With ENVSIM_SHARDS set, pipeline/definitions.py puts this in place of assets/selection.py's
    step_table_expectations: that one reads the whole step table, which in one partition's run other
    partitions' runs may be rewriting, and which is empty until a first partition is labeled."""
    from pipeline.quality.suites import step_table_suite

    layout = scoped(store.layout(), context)
    if not layout.step_parts():
        return AssetCheckResult(passed=True, metadata={"partition": str(layout.partition), "rows": 0,
                                                       "failures": MetadataValue.md("_empty partition: no steps to check_")})
    suite = step_table_suite(layout)
    return AssetCheckResult(passed=suite.success, metadata={
        "partition": str(layout.partition), "rows": suite.rows, "expectations_evaluated": suite.evaluated,
        "failures": MetadataValue.md(suite.markdown()),
    })
