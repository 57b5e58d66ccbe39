"""Shards of the collection: ``ENVSIM_SHARDS=N`` splits every environment source into N shards.

A shard is ``<source>-<i>`` (partition keys of the ``trajectories`` / ``labeled_steps`` assets):
the environments of ``source`` (bfcl, builtin, envscaler) whose stable hash — blake2b of the
env id, independent of the process, the machine and ``PYTHONHASHSEED`` — is ``i`` modulo N.
Every environment belongs to exactly one shard, always the same one for the same N.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from typing import Mapping

from pipeline.envs import bfcl, builtin
from pipeline.core.environment import EnvSpec

#: environment sources, in partition-key order
SOURCES = ("bfcl", "builtin", "envscaler")
ENV_VAR = "ENVSIM_SHARDS"


def shard_count(environ: Mapping[str, str] | None = None) -> int | None:
    """N from ``ENVSIM_SHARDS`` (unset or empty: None = no partitioning)."""
    raw = (os.environ if environ is None else environ).get(ENV_VAR, "").strip()
    if not raw:
        return None
    try:
        count = int(raw)
    except ValueError:
        raise ValueError(f"{ENV_VAR} must be a whole number >= 1, got {raw!r}") from None
    if count < 1:
        raise ValueError(f"{ENV_VAR} must be a whole number >= 1, got {raw!r}")
    return count


def partition_keys(count: int) -> list[str]:
    """``<source>-<i>`` for every source and i in 0..count-1."""
    return [f"{source}-{i}" for source in SOURCES for i in range(count)]


def shard_index(env_id: str, count: int) -> int:
    """Stable shard of an environment id (blake2b, never Python's salted ``hash``)."""
    return int.from_bytes(hashlib.blake2b(env_id.encode("utf-8"), digest_size=8).digest(), "big") % count


def source_of(env: EnvSpec) -> str:
    """The source an environment belongs to: bfcl-eval classes, the builtin pack, or an EnvScaler corpus."""
    if env.source == bfcl.SOURCE:
        return "bfcl"
    if env.env_id.startswith(f"{builtin.PREFIX}/"):
        return "builtin"
    return "envscaler"


@dataclass(frozen=True)
class Shard:
    source: str
    index: int
    count: int

    @property
    def key(self) -> str:
        return f"{self.source}-{self.index}"

    @classmethod
    def parse(cls, key: str, count: int) -> "Shard":
        source, _, index = key.rpartition("-")
        if source not in SOURCES or not index.isdigit() or int(index) >= count:
            raise ValueError(f"unknown partition {key!r}; with {ENV_VAR}={count} the partitions are {partition_keys(count)}")
        return cls(source, int(index), count)

    def contains(self, env: EnvSpec) -> bool:
        return source_of(env) == self.source and shard_index(env.env_id, self.count) == self.index

    @property
    def is_first(self) -> bool:
        """Shard 0 of its source also reports the source's issues that name no environment
        (a task line that is not JSON, an env item that does not compile)."""
        return self.index == 0
