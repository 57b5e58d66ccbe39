"""Atomic Parquet writes: a file is either complete or absent, never half-written."""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator

import pyarrow as pa
import pyarrow.parquet as pq


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def write_table(path: Path, rows: Iterable[dict[str, Any]], schema: pa.Schema, batch_rows: int = 512) -> int:
    """Stream ``rows`` into ``path`` (atomically) in record batches; returns the row count."""
    count = 0
    with atomic_path(path) as tmp:
        with pq.ParquetWriter(tmp, schema, compression="zstd") as writer:
            batch: list[dict[str, Any]] = []
            for row in rows:
                batch.append(row)
                if len(batch) >= batch_rows:
                    writer.write_table(pa.Table.from_pylist(batch, schema=schema))
                    count += len(batch)
                    batch = []
            if batch or count == 0:
                writer.write_table(pa.Table.from_pylist(batch, schema=schema))
                count += len(batch)
    return count
