"""SQL (DuckDB) summaries over the Parquet tables, scanned in place — no corpus in Python lists."""

from __future__ import annotations

import pandas as pd

from pipeline.core.outcome import OUTCOMES
from pipeline.core.strata import BALANCE2_GROUP_SQL, Composition
from pipeline.store.duck import connect
from pipeline.store.layout import DataLayout


def _steps(layout: DataLayout) -> str:
    return f"read_parquet('{layout.steps_glob()}')"


def has_steps(layout: DataLayout) -> bool:
    return bool(layout.step_parts())


def delta_by_outcome(layout: DataLayout) -> pd.DataFrame:
    """|Δ| (rows) × outcome (columns) step counts, with totals."""
    df = connect().sql(f'SELECT delta_size AS "|Δ|", outcome, count(*) AS n FROM {_steps(layout)} GROUP BY ALL').df()
    table = df.pivot_table(index="|Δ|", columns="outcome", values="n", fill_value=0, aggfunc="sum")
    table = table.reindex(columns=list(OUTCOMES), fill_value=0).astype(int)
    table["total"] = table.sum(axis=1)
    table.loc["total"] = table.sum(axis=0)
    table.columns.name = None
    return table


def step_totals(layout: DataLayout) -> dict[str, int]:
    con = connect()
    row = con.execute(
        f"""SELECT count(*), count(DISTINCT trajectory_id), count(DISTINCT env_id), count(DISTINCT tool),
                   max(delta_size)
            FROM {_steps(layout)}"""
    ).fetchone()
    return dict(zip(["steps", "trajectories", "environments", "tools", "max_delta"], [int(v or 0) for v in row]))


def environment_ids(layout: DataLayout) -> tuple[list[str], list[str]]:
    """``(the catalog's environments, the environments the steps name)``, each sorted (composites such as
    ``bfcl/A+B`` and environments without steps tell them apart)."""
    con = connect()
    stepped = [r[0] for r in con.execute(f"SELECT DISTINCT env_id FROM {_steps(layout)} ORDER BY 1").fetchall()]
    listed = []
    if layout.environments.exists():
        rows = con.execute("SELECT env_id FROM read_parquet(?) ORDER BY 1", [str(layout.environments)]).fetchall()
        listed = [r[0] for r in rows]
    return listed, stepped


def steps_by_env(layout: DataLayout) -> pd.DataFrame:
    con = connect()
    return con.sql(
        f"""SELECT env_id, count(DISTINCT trajectory_id) AS trajectories, count(*) AS steps,
                   count(*) FILTER (outcome = 'failure') AS failures,
                   count(*) FILTER (outcome = 'error') AS errors, max(delta_size) AS max_delta
            FROM {_steps(layout)} GROUP BY env_id ORDER BY steps DESC"""
    ).df()


def tool_spread_sql(relation: str, group_sql: str, where: str = "true") -> str:
    """SQL: per group of ``relation``, the distinct (env, tool) pairs (``tool_pairs``), the most frequent one
    (``top_tool``: ``tool (env_id)``, ties by tool then env) and its share of the rows (``top_tool_share``)."""
    return f"""WITH pairs AS (
                 SELECT {group_sql} AS grp, env_id, tool, count(*) AS n FROM {relation} WHERE {where} GROUP BY ALL),
               ranked AS (
                 SELECT grp, tool || ' (' || env_id || ')' AS top_tool, n,
                 count(*) OVER (PARTITION BY grp) AS tool_pairs,
                        sum(n) OVER (PARTITION BY grp) AS total
                 FROM pairs QUALIFY row_number() OVER (PARTITION BY grp ORDER BY n DESC, tool, env_id) = 1)
               SELECT grp, tool_pairs, top_tool, round(n / total, 3) AS top_tool_share FROM ranked"""


def cell_coverage(layout: DataLayout, composition: Composition | None = None, factor: float = 2.0) -> pd.DataFrame:
    """Candidates, distinct environments, tasks and (env, tool) pairs per benchmark cell of ``composition``
    against ``factor`` × quota; a step counts for every cell whose rule it matches."""
    composition = composition if composition is not None else Composition()
    con = connect()
    candidates = (
        f"(SELECT cell, env_id, task_id, tool FROM (SELECT unnest({composition.cells_sql()}) AS cell, "
        f"env_id, task_id, tool FROM {_steps(layout)}) WHERE cell IS NOT NULL)"
    )
    df = (
        con.sql(
            f"""SELECT cell, count(*) AS candidates, count(DISTINCT env_id) AS environments,
                   count(DISTINCT task_id) AS tasks
            FROM {candidates} GROUP BY ALL"""
        )
        .df()
        .set_index("cell")
    )
    spread = con.sql(tool_spread_sql(candidates, "cell")).df().set_index("grp")
    rows = []
    for c in composition.cells:
        have = df.loc[c.name] if c.name in df.index else None
        tools = spread.loc[c.name] if c.name in spread.index else None
        n = int(have["candidates"]) if have is not None else 0
        rows.append(
            {
                "cell": c.name,
                "quota": c.quota,
                "candidates": n,
                "environments": int(have["environments"]) if have is not None else 0,
                "tasks": int(have["tasks"]) if have is not None else 0,
                "tool_pairs": int(tools["tool_pairs"]) if tools is not None else 0,
                "top_tool": tools["top_tool"] if tools is not None else "",
                "top_tool_share": float(tools["top_tool_share"]) if tools is not None else 0.0,
                f"≥{factor:g}×quota": "yes" if n >= factor * c.quota else "NO",
            }
        )
    return pd.DataFrame(rows)


def balance2_coverage(layout: DataLayout, composition: Composition | None = None) -> pd.DataFrame:
    """Steps per Balance2 group (``candidates``) against the mixture sizes of ``composition``."""
    composition = composition if composition is not None else Composition()
    con = connect()
    df = (
        con.sql(
            f"SELECT {BALANCE2_GROUP_SQL} AS grp, count(*) AS n, count(DISTINCT env_id) AS envs FROM "
            f"{_steps(layout)} GROUP BY ALL"
        )
        .df()
        .set_index("grp")
    )
    return pd.DataFrame(
        [
            {
                "group": g,
                "wanted": n,
                "candidates": int(df.loc[g, "n"]) if g in df.index else 0,
                "environments": int(df.loc[g, "envs"]) if g in df.index else 0,
            }
            for g, n in composition.mixture_sizes.items()
        ]
    )
