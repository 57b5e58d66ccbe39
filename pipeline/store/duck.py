"""Every DuckDB connection of the pipeline, with a bounded memory budget.

``ENVSIM_DUCKDB_MEMORY`` (default ``512MB``) caps DuckDB's buffer manager and ``ENVSIM_DUCKDB_THREADS``
its threads (default: all cores); operators that exceed the cap spill to a temporary directory
instead of growing without bound. ``connection_config()`` is the configuration of every connection:
``connect()`` opens the pipeline's, and the ``duckdb`` resource of the code location
(``resources/storage.py``) opens ``envsim.duckdb`` with it (through Dagster's DuckDB resource, which
retries while another process holds the file).
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import duckdb

from pipeline.core.settings import settings


def connection_config() -> dict[str, Any]:
    """DuckDB's configuration for a connection: the memory cap, the spill directory, the threads."""
    current = settings()
    config: dict[str, Any] = {
        "memory_limit": current.duckdb_memory,
        "temp_directory": os.path.join(tempfile.gettempdir(), "envsim-duckdb"),
    }
    if current.duckdb_threads:
        config["threads"] = current.duckdb_threads
    return config


def connect() -> duckdb.DuckDBPyConnection:
    """An in-memory connection (scans over the Parquet tables) under the memory cap."""
    return duckdb.connect(":memory:", config=connection_config())


def connect_file(path: str | os.PathLike[str], read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """A connection to a DuckDB file (``envsim.duckdb``) under the same memory cap, for writers outside the
    Dagster ``duckdb`` resource (command-line tools such as ``./forge bench-model``)."""
    return duckdb.connect(str(path), read_only=read_only, config=connection_config())
