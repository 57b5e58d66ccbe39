"""SQL (DuckDB) summaries over the Parquet tables, scanned in place — no corpus in Python lists."""

from __future__ import annotations

import duckdb
import pandas as pd

from pipeline.labeling.outcome import OUTCOMES
from pipeline.store.layout import DataLayout


def _steps(layout: DataLayout) -> str:
    return f"read_parquet('{layout.steps_glob()}')"


def has_steps(layout: DataLayout) -> bool:
    return any(layout.steps_dir.glob("part-*.parquet"))


def delta_by_outcome(layout: DataLayout) -> pd.DataFrame:
    """|Δ| (rows) × outcome (columns) step counts, with totals."""
    con = duckdb.connect()
    df = con.sql(
        f"SELECT delta_size AS \"|Δ|\", outcome, count(*) AS n FROM {_steps(layout)} GROUP BY ALL"
    ).df()
    table = df.pivot_table(index="|Δ|", columns="outcome", values="n", fill_value=0, aggfunc="sum")
    for outcome in OUTCOMES:
        if outcome not in table.columns:
            table[outcome] = 0
    table = table[list(OUTCOMES)].astype(int)
    table["total"] = table.sum(axis=1)
    table.loc["total"] = table.sum(axis=0)
    table.columns.name = None
    return table


def step_totals(layout: DataLayout) -> dict[str, int]:
    con = duckdb.connect()
    row = con.execute(
        f"""SELECT count(*), count(DISTINCT trajectory_id), count(DISTINCT env_id), count(DISTINCT tool),
                   max(delta_size)
            FROM {_steps(layout)}"""
    ).fetchone()
    return dict(zip(["steps", "trajectories", "environments", "tools", "max_delta"], [int(v or 0) for v in row]))


def steps_by_env(layout: DataLayout) -> pd.DataFrame:
    con = duckdb.connect()
    return con.sql(
        f"""SELECT env_id, count(DISTINCT trajectory_id) AS trajectories, count(*) AS steps,
                   count(*) FILTER (outcome = 'failure') AS failures,
                   count(*) FILTER (outcome = 'error') AS errors, max(delta_size) AS max_delta
            FROM {_steps(layout)} GROUP BY env_id ORDER BY steps DESC"""
    ).df()
