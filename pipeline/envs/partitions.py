"""The partitions of the registered sources: ``<source>-<i>`` (:mod:`pipeline.store.partitions` holds the
shard rule and the files; storage knows no source). A module of its own so that the sandbox worker, which
imports the registry, does not import the storage layer's Parquet code."""

from __future__ import annotations

from pipeline.envs import registry
from pipeline.store.partitions import Shard
from pipeline.store.partitions import partition_keys as _keys


def partitioned_sources() -> tuple[str, ...]:
    """The sources with partitions of their own: every registered one (registry order) but those whose trajectories
    are on other sources' environments (``foreign``: served episodes), which go to their environments' partitions."""
    return tuple(s.name for s in registry.sources() if not s.foreign)


def partition_keys(count: int) -> list[str]:
    """``<source>-<i>`` for every partitioned source (:func:`partitioned_sources`) and i in 0..count-1."""
    return _keys(count, partitioned_sources())


def parse_shard(key: str, count: int) -> Shard:
    """The shard of partition ``key`` (``<source>-<i>``) of ``count``, or a ValueError listing the partitions."""
    return Shard.parse(key, count, partitioned_sources())
