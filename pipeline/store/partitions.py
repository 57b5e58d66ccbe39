"""Keeping a partitioned and an unpartitioned trajectories table from ever being read together.

A partitioned collection (``ENVSIM_SHARDS=N``) writes ``trajectories/part-<partition>.parquet`` and
``issues-<partition>.parquet``; an unpartitioned one ``trajectories.parquet`` and ``issues.parquet``.
Readers take every file (``DataLayout.trajectory_files()``), so a switch between the two — or to
another N, which moves environments between shards — must drop the other kind's files:

* an unpartitioned collection removes every partition file once its own table is written;
* the first partitioned collection under a new partitioning (recorded in ``PARTITIONS.json``)
  removes the unpartitioned table and every partition file, under a file lock, before it collects;
  later partitions of the same partitioning find the marker and leave their siblings alone.
"""

from __future__ import annotations

import fcntl
import json
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from pipeline.store.layout import DataLayout
from pipeline.store.parquet_io import atomic_path

MARKER = "PARTITIONS.json"


def _marker(layout: DataLayout) -> Path:
    return layout.trajectories_dir / MARKER


def _partition_files(layout: DataLayout) -> list[Path]:
    d = layout.trajectories_dir
    return sorted(d.glob("part-*.parquet")) + sorted(d.glob("issues-*.parquet"))


@contextmanager
def _locked(layout: DataLayout) -> Iterator[None]:
    layout.trajectories_dir.mkdir(parents=True, exist_ok=True)
    with (layout.trajectories_dir / ".partitions.lock").open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


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
