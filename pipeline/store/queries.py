"""SQL (DuckDB) summaries over the Parquet tables, scanned in place — no corpus in Python lists."""

from __future__ import annotations

import duckdb
import pandas as pd

from pipeline.labeling.outcome import OUTCOMES
from pipeline.store.layout import DataLayout


def _steps(layout: DataLayout) -> str:
    return f"read_parquet('{layout.steps_glob()}')"


def has_steps(layout: DataLayout) -> bool:
    return bool(layout.step_parts())


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


def cell_coverage(layout: DataLayout, factor: float = 2.0) -> pd.DataFrame:
    """Candidates and distinct environments per benchmark cell (DESIGN §5), against ``factor`` × quota."""
    from pipeline.strata import BENCHMARK_CELL_SQL, BENCHMARK_CELLS

    con = duckdb.connect()
    df = con.sql(
        f"""SELECT {BENCHMARK_CELL_SQL} AS cell, count(*) AS candidates, count(DISTINCT env_id) AS environments,
                   count(DISTINCT task_id) AS tasks
            FROM {_steps(layout)} GROUP BY ALL"""
    ).df().set_index("cell")
    rows = []
    for c in BENCHMARK_CELLS:
        have = df.loc[c.name] if c.name in df.index else None
        n = int(have["candidates"]) if have is not None else 0
        rows.append({
            "cell": c.name, "quota": c.quota, "candidates": n,
            "environments": int(have["environments"]) if have is not None else 0,
            "tasks": int(have["tasks"]) if have is not None else 0,
            f"≥{factor:g}×quota": "yes" if n >= factor * c.quota else "NO",
        })
    return pd.DataFrame(rows)


def balance2_coverage(layout: DataLayout) -> pd.DataFrame:
    """Steps per Balance2 group against the default mixture sizes."""
    from pipeline.strata import BALANCE2_GROUP_SQL, BALANCE2_GROUPS

    con = duckdb.connect()
    df = con.sql(
        f"SELECT {BALANCE2_GROUP_SQL} AS grp, count(*) AS n, count(DISTINCT env_id) AS envs FROM {_steps(layout)} GROUP BY ALL"
    ).df().set_index("grp")
    return pd.DataFrame([
        {"group": g, "wanted": n, "available": int(df.loc[g, "n"]) if g in df.index else 0,
         "environments": int(df.loc[g, "envs"]) if g in df.index else 0}
        for g, n in BALANCE2_GROUPS.items()
    ])
