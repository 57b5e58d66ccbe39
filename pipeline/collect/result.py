"""What a collection returns: its report, exploration coverage, agent episodes and, for a partition,
what the shard held (kept with the trajectories by :mod:`pipeline.collect.reuse`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.collect.collector import CollectReport
from pipeline.collect.explore import Coverage
from pipeline.store.partitions import Shard


@dataclass
class CollectionResult:
    report: CollectReport
    coverage: Coverage | None
    agent_episodes: list[dict] = field(default_factory=list)
    shard: "ShardSummary | None" = None
    without_scenarios: list[str] = field(default_factory=list)  # corpus environments no scenario names
    reused: bool = False  # the recorded result of an identical earlier collection (pipeline.collect.reuse)


@dataclass
class ShardSummary:
    """What one partition of a sharded collection held."""

    shard: Shard
    source_envs: set[str] = field(default_factory=set)  # environments of the shard's source seen, all shards
    shard_envs: set[str] = field(default_factory=set)  # ... of them in this shard
    configured: bool = True  # whether the source has anything configured at all
    note: str = ""
