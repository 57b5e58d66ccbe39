"""Opt-in partitioning of collection and labeling (``Settings.shards``, ``ENVSIM_SHARDS=N``): ``build_definitions``
gives ``trajectories`` and ``labeled_steps`` the static partitions ``<source>-<i>`` (one per source and shard; keys and
shard rule: ``pipeline.store.partitions``), a backfill runs one run per partition, and everything downstream stays
unpartitioned, reading all partitions. Nothing here reads the environment: a step finds its partition on its context."""

from dagster import (
    AssetCheckExecutionContext,
    AssetExecutionContext,
    AssetsDefinition,
    PartitionsDefinition,
    StaticPartitionsDefinition,
)

from pipeline.envs.partitions import parse_shard, partition_keys
from pipeline.store.layout import DataLayout
from pipeline.store.partitions import Shard

#: the assets partitioned by shard when shards are set
PARTITIONED = ("trajectories", "labeled_steps")


def shards_partitions(count: int | None) -> StaticPartitionsDefinition | None:
    """The partitions of ``count`` shards per source (None: unpartitioned)."""
    return StaticPartitionsDefinition(partition_keys(count)) if count else None


def partitioned(assets_def: AssetsDefinition, partitions: PartitionsDefinition | None) -> AssetsDefinition:
    """``assets_def`` with ``partitions`` when it is one of ``PARTITIONED`` (else unchanged)."""
    if partitions is None or not any(key.to_user_string() in PARTITIONED for key in assets_def.keys):
        return assets_def
    return assets_def.map_asset_specs(lambda spec: spec.replace_attributes(partitions_def=partitions))


def partition_of(context: AssetExecutionContext | AssetCheckExecutionContext) -> str | None:
    op = context.op_execution_context
    return op.partition_key if op.has_partition_key else None


def shard_of(context: AssetExecutionContext) -> Shard | None:
    """The shard the step's partition holds (its count: the partitions of the asset's definition)."""
    key = partition_of(context)
    if key is None:
        return None
    source = key.rpartition("-")[0]
    keys = context.assets_def.partitions_def.get_partition_keys()
    return parse_shard(key, sum(1 for k in keys if k.rpartition("-")[0] == source))


def scoped(layout: DataLayout, context: AssetExecutionContext | AssetCheckExecutionContext) -> DataLayout:
    """The partition's view of the data root in a partitioned run, else the whole root."""
    return layout.for_partition(partition_of(context))


def partition_metadata(context: AssetExecutionContext | AssetCheckExecutionContext) -> dict[str, str]:
    """``{"partition": key}`` in a partitioned run, else nothing (for asset and check metadata)."""
    key = partition_of(context)
    return {"partition": key} if key is not None else {}
