"""Partitions of collection and labeling: the keys, the rule that assigns environments to them (a **shard** is a
slice of one source's environments by a stable hash of the env id, a **partition** what holds one shard's data),
and keeping partitioned and unpartitioned trajectories files from ever being read together: an unpartitioned
collection removes every partition file once its table is written, and the first partitioned collection under a
new partitioning (recorded in ``PARTITIONS.json``) removes the unpartitioned table and every partition file.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

from pipeline.store.layout import DataLayout, file_lock
from pipeline.store.parquet_io import atomic_path

ENV_VAR = "ENVSIM_SHARDS"
MARKER = "PARTITIONS.json"


def partition_keys(count: int, sources: Sequence[str]) -> list[str]:
    """``<source>-<i>`` for every source (in the given order) and i in 0..count-1."""
    return [f"{source}-{i}" for source in sources for i in range(count)]


def shard_index(env_id: str, count: int) -> int:
    """Stable shard of an environment id (blake2b, never Python's salted ``hash``)."""
    return int.from_bytes(hashlib.blake2b(env_id.encode("utf-8"), digest_size=8).digest(), "big") % count


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count`` of the environments of ``source``; ``key`` is its partition."""

    source: str
    index: int
    count: int

    @property
    def key(self) -> str:
        return f"{self.source}-{self.index}"

    @classmethod
    def parse(cls, key: str, count: int, sources: Sequence[str]) -> Shard:
        """The shard of partition ``key`` among the partitions of ``sources``, or a ValueError listing them."""
        source, _, index = key.rpartition("-")
        if source not in sources or not index.isdigit() or int(index) >= count:
            raise ValueError(
                f"unknown partition {key!r}; with {ENV_VAR}={count} the partitions are {partition_keys(count, sources)}"
            )
        return cls(source, int(index), count)

    def holds(self, source: str, env_id: str) -> bool:
        """Whether the environment ``env_id`` of ``source`` (``pipeline.envs.registry.source_of``) is in this shard."""
        return source == self.source and shard_index(env_id, self.count) == self.index

    @property
    def is_first(self) -> bool:
        """Shard 0 of its source also reports the source's issues that name no environment."""
        return self.index == 0


def _marker(layout: DataLayout) -> Path:
    return layout.trajectories_dir / MARKER


def _partition_files(layout: DataLayout) -> list[Path]:
    d = layout.trajectories_dir
    return sorted(d.glob("part-*.parquet")) + sorted(d.glob("issues-*.parquet"))


def _locked(layout: DataLayout) -> AbstractContextManager[None]:
    return file_lock(layout.trajectories_dir / ".partitions.lock")


def begin_partitioned(layout: DataLayout, keys: list[str]) -> list[str]:
    """Before partition ``layout.partition`` of the partitioning ``keys`` collects: drop the files of
    any other partitioning (and the unpartitioned table). Returns the names removed."""
    root = layout.for_partition(None)
    removed: list[str] = []
    with _locked(root):
        marker = _marker(root)
        current = json.loads(marker.read_text()).get("partitions") if marker.exists() else None
        stale = [p for p in (root.trajectories, root.collection_issues) if p.exists()]
        if current != keys:
            stale += _partition_files(root)
        for path in stale:
            path.unlink(missing_ok=True)
            removed.append(path.name)
        if current != keys:
            with atomic_path(marker) as tmp:
                tmp.write_text(json.dumps({"partitions": keys}))
    return removed


def end_unpartitioned(layout: DataLayout) -> list[str]:
    """After an unpartitioned collection wrote its table: drop every partition file. Returns the names removed."""
    root = layout.for_partition(None)
    removed: list[str] = []
    if not _partition_files(root) and not _marker(root).exists():
        return removed  # the usual case: never partitioned
    with _locked(root):
        for path in _partition_files(root) + [_marker(root)]:
            if path.exists():
                path.unlink()
                removed.append(path.name)
    return removed
