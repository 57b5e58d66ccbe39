"""Opt-in partitioning of collection and labeling: ``ENVSIM_SHARDS=N`` (read when the code location loads).

Unset, ``trajectories`` and ``labeled_steps`` are unpartitioned (the default run). Set, both get the
static partitions ``<source>-<i>`` (bfcl / builtin / envscaler × i < N: one partition per shard; the
keys and the shard rule are ``pipeline.store.partitions``) and a backfill runs one run per partition;
everything downstream stays unpartitioned and reads all partitions.
"""

from dagster import AssetCheckExecutionContext, AssetExecutionContext, StaticPartitionsDefinition

from pipeline.envs.partitions import parse_shard, partition_keys
from pipeline.store.partitions import Shard, shard_count
from pipeline.store.layout import DataLayout

SHARDS_COUNT = shard_count()
SHARDS = StaticPartitionsDefinition(partition_keys(SHARDS_COUNT)) if SHARDS_COUNT else None


def partition_of(context: AssetExecutionContext | AssetCheckExecutionContext) -> str | None:
    op = context.op_execution_context
    return op.partition_key if SHARDS is not None and op.has_partition_key else None


def shard_of(context: AssetExecutionContext) -> Shard | None:
    key = partition_of(context)
    return parse_shard(key, SHARDS_COUNT) if key is not None else None


def scoped(layout: DataLayout, context: AssetExecutionContext | AssetCheckExecutionContext) -> DataLayout:
    """The partition's view of the data root in a partitioned run, else the whole root."""
    return layout.for_partition(partition_of(context))


def partition_metadata(context: AssetExecutionContext | AssetCheckExecutionContext) -> dict[str, str]:
    """``{"partition": key}`` in a partitioned run, else nothing (for asset and check metadata)."""
    key = partition_of(context)
    return {"partition": key} if key is not None else {}
