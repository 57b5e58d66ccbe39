"""Every DuckDB connection of the pipeline, under the memory cap and threads of ``ENVSIM_DUCKDB_MEMORY`` /
``ENVSIM_DUCKDB_THREADS`` (an entry point hands its ``Settings`` to :func:`configure` once); :func:`connection_config`
is also the ``duckdb`` resource's.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import duckdb

from pipeline.core.settings import Settings
from pipeline.store import warehouse
from pipeline.store.layout import DataLayout

#: the DuckDB file's name under a data root
DUCKDB_FILE = "envsim.duckdb"


#: the DuckDB settings of this process's connections (``Settings``' defaults until :func:`configure`)
_configured: list[Settings] = [Settings()]


def configure(current: Settings) -> None:
    """Take the DuckDB memory cap and threads of ``current`` for every later connection of this process."""
    _configured[0] = current


def connection_config() -> dict[str, Any]:
    """DuckDB's configuration for a connection: the memory cap, the spill directory, the threads."""
    current = _configured[0]
    config: dict[str, Any] = {
        "memory_limit": current.duckdb_memory,
        "temp_directory": os.path.join(tempfile.gettempdir(), "envsim-duckdb"),
    }
    if current.duckdb_threads:
        config["threads"] = current.duckdb_threads
    return config


#: the bytes at offset 8 of every DuckDB database file
_MAGIC = b"DUCK"


def index_problem(path: Path) -> str | None:
    """What makes the DuckDB file ``path`` unusable as it is: empty (a write cut short by a full disk) or not a DuckDB
    database (its header); None when it is missing (made on opening) or looks like one."""
    try:
        with path.open("rb") as fh:
            head = fh.read(12)
    except FileNotFoundError:
        return None
    if not head:
        return "is empty (0 bytes)"
    return None if head[8:12] == _MAGIC else "is not a DuckDB database file"


def repair_index(layout: DataLayout) -> str | None:
    """Make the data root's ``envsim.duckdb`` (an index of the Parquet tables) again and sync it when it is empty,
    not a DuckDB database, or missing under a root that holds tables; the one line that says so, else None."""
    path = layout.duckdb
    problem = index_problem(path)
    if problem is None and (path.exists() or not layout.environments.exists()):
        return None
    for stale in (path, path.with_name(path.name + ".wal")):
        stale.unlink(missing_ok=True)
    with duckdb.connect(str(path), config=connection_config()) as con:
        views = warehouse.sync(con, layout)
    return (
        f"{path} {problem or 'was missing'}: rebuilt from the Parquet tables under {layout.root} ({len(views)} views "
        "and the split versions; evaluation results load again at the next simulator_eval)"
    )


def connect() -> duckdb.DuckDBPyConnection:
    """An in-memory connection (scans over the Parquet tables) under the memory cap."""
    return duckdb.connect(":memory:", config=connection_config())


def connect_file(path: str | os.PathLike[str], read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """A connection to a DuckDB file under the same memory cap, outside the Dagster ``duckdb`` resource; a data
    root's ``envsim.duckdb`` is synced with the directory it is in now, so a moved root answers at once."""
    con = duckdb.connect(str(path), read_only=read_only, config=connection_config())
    if Path(path).name == DUCKDB_FILE:
        warehouse.sync(con, DataLayout.at(Path(path).resolve().parent))
    return con


def open_data_root(data_root: str | os.PathLike[str], read_only: bool = True) -> duckdb.DuckDBPyConnection:
    """The documented way to open a data root's ``envsim.duckdb`` for SQL (read-only by default, so it can be
    open while Dagster runs): every view answers for the root where it is now, every object has its comment."""
    return connect_file(Path(data_root) / DUCKDB_FILE, read_only=read_only)
