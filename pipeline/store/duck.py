"""DuckDB connections for scans over the Parquet tables, with a bounded memory budget.

``ENVSIM_DUCKDB_MEMORY`` (default ``512MB``) caps DuckDB's buffer manager and ``ENVSIM_DUCKDB_THREADS``
its threads (default: all cores); operators that exceed the cap spill to a temporary directory
instead of growing without bound.
"""

from __future__ import annotations

import os
import tempfile

import duckdb

DEFAULT_MEMORY = "512MB"


def connect(memory_limit: str | None = None, threads: int | None = None) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute(f"SET memory_limit = '{memory_limit or os.environ.get('ENVSIM_DUCKDB_MEMORY', DEFAULT_MEMORY)}'")
    con.execute(f"SET temp_directory = '{os.path.join(tempfile.gettempdir(), 'envsim-duckdb')}'")
    threads = threads or int(os.environ.get("ENVSIM_DUCKDB_THREADS", "0"))
    if threads:
        con.execute(f"SET threads = {threads}")
    return con
