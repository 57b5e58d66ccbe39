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

DEFAULT_MEMORY = "512MB"


def connection_config(memory_limit: str | None = None, threads: int | None = None) -> dict[str, Any]:
    """DuckDB's configuration for a connection: the memory cap, the spill directory, the threads."""
    current = settings()
    config: dict[str, Any] = {
        "memory_limit": memory_limit or current.duckdb_memory,
        "temp_directory": os.path.join(tempfile.gettempdir(), "envsim-duckdb"),
    }
    threads = threads or current.duckdb_threads
    if threads:
        config["threads"] = threads
    return config


def connect(database: str = ":memory:", *, read_only: bool = False, memory_limit: str | None = None,
            threads: int | None = None, config: dict[str, Any] | None = None) -> duckdb.DuckDBPyConnection:
    """A connection to ``database`` (default: in memory) under the memory cap; ``config`` adds or
    overrides DuckDB settings."""
    return duckdb.connect(database, read_only=read_only, config={**connection_config(memory_limit, threads), **(config or {})})
