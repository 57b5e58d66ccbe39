"""Atomic Parquet writes: a file is either complete or absent, never half-written."""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """A temporary path beside ``path`` for the block to write; on a clean exit it is fsynced and renamed over
    ``path`` (the directory fsynced too), so ``path`` is the old version or the new one, also after a crash."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        yield tmp
        _fsync(tmp)
        os.replace(tmp, path)
        _fsync(path.parent)
    finally:
        tmp.unlink(missing_ok=True)


def _fsync(path: Path) -> None:
    """Flush ``path`` (a file, or a directory's entries) to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_table(path: Path, rows: Iterable[dict[str, Any]], schema: pa.Schema, batch_rows: int = 512) -> int:
    """Stream ``rows`` into ``path`` (atomically) in record batches (:class:`RowWriter`); returns the row count."""
    with RowWriter(path, schema, batch_rows) as out:
        for row in rows:
            out.add(row)
    return out.count


def write_arrow(path: Path, table: pa.Table, schema: pa.Schema, batch_rows: int = 512) -> int:
    """Write an Arrow table to ``path`` atomically, the same bytes :func:`write_table` gives for the same rows."""
    with atomic_path(path) as tmp, pq.ParquetWriter(tmp, schema, compression="zstd") as writer:
        if table.num_rows == 0:
            writer.write_table(table.cast(schema))
        for start in range(0, table.num_rows, batch_rows):
            writer.write_table(table.slice(start, batch_rows).cast(schema))
    return table.num_rows


class RowWriter:
    """Rows added one by one (``with RowWriter(path, schema) as out: out.add(row)``), written in batches to
    ``path`` atomically on a clean exit (a failure leaves no file)."""

    def __init__(self, path: Path, schema: pa.Schema, batch_rows: int = 512) -> None:
        self.path, self.schema, self.batch_rows = path, schema, batch_rows
        self.count = 0
        self._batch: list[dict[str, Any]] = []

    def __enter__(self) -> RowWriter:
        self._atomic = atomic_path(self.path)
        self._tmp = self._atomic.__enter__()
        self._writer = pq.ParquetWriter(self._tmp, self.schema, compression="zstd")
        return self

    def add(self, row: dict[str, Any]) -> None:
        self._batch.append(row)
        if len(self._batch) >= self.batch_rows:
            self._flush()

    def _flush(self) -> None:
        self._writer.write_table(pa.Table.from_pylist(self._batch, schema=self.schema))
        self.count += len(self._batch)
        self._batch = []

    def __exit__(self, *exc: Any) -> None:
        try:
            if exc[0] is None and (self._batch or self.count == 0):
                self._flush()
        finally:
            self._writer.close()
            self._atomic.__exit__(*exc)


class BackgroundWrites:
    """Run write calls on one background thread, in order, while the caller builds the next batch (compression
    releases the GIL). At most ``depth`` calls wait; the first error is re-raised by :meth:`submit` or
    :meth:`close`."""

    def __init__(self, depth: int = 2) -> None:
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=depth)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="envsim-writer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            if self._error is None:
                try:
                    item[0](*item[1])
                except BaseException as exc:  # re-raised in the caller's thread
                    self._error = exc

    def submit(self, fn: Any, *args: Any) -> None:
        if self._error is not None:
            raise self._error
        self._queue.put((fn, args))

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join()
        if self._error is not None:
            raise self._error

    def __enter__(self) -> BackgroundWrites:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
