"""Rollout tasks from the trajectories table, rollout results in Parquet and DuckDB, and the drift plot.

Files, per run (simulator × agent) under ``data/rollouts/<simulator>@<agent>/``: ``requests.jsonl`` (the resumable
request log), ``steps.parquet`` (one row per simulated step) and ``rollouts.parquet`` (one row per rollout). DuckDB:
views ``rollout_steps`` and ``rollouts`` over every run's files, and the breakdowns ``rollout_by_simulator``,
``rollout_by_delta`` (|Δ| bucket of the real step), ``rollout_by_step`` (step index) and ``rollout_by_env``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.core.axes import AXES
from pipeline.report.plots import line_plot
from pipeline.rollouts.loop import RolloutTask
from pipeline.store import catalog, warehouse
from pipeline.store.layout import DataLayout, safe_name
from pipeline.store.parquet_io import atomic_path
from pipeline.store.tables import TABLES
from pipeline.store.trajectories import iter_trajectory_rows, row_to_trajectory

STEPS = TABLES["rollout_steps"].schema
ROLLOUTS = TABLES["rollouts"].schema


def rollouts_root(layout: DataLayout) -> Path:
    return layout.rollouts


def run_dir(layout: DataLayout, run_id: str) -> Path:
    return rollouts_root(layout) / safe_name(run_id.replace("/", "_"), "rollout run id")


def _content_text(content: Any) -> str:
    """A message's text: a string as is, the text parts of a content list joined, anything else empty."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def recorded_turns(messages_json: str | None) -> tuple[str, ...]:
    """The user turns of a recorded message history (an agent trajectory's), one per user message — the
    turn numbering of its actions (:func:`pipeline.collect.agent.actions_from_messages`)."""
    if not messages_json:
        return ()
    messages = json.loads(messages_json)
    return tuple(_content_text(m.get("content")) for m in messages if isinstance(m, dict) and m.get("role") == "user")


def recorded_tasks(
    layout: DataLayout,
    limit: int | None = 40,
    seed: int = 0,
    sources: Sequence[str] = (),
    min_steps: int = 2,
    questions: Mapping[tuple[str, str], Sequence[str]] | None = None,
) -> list[RolloutTask]:
    """Recorded trajectories to roll out: those with at least ``min_steps`` actions (of ``sources``, if
    given), in a seeded order (blake2b of seed and trajectory id), the first ``limit``. Each task carries the
    user turns its agent was asked: the recorded message history's (agent trajectories), else
    ``questions[(env id, task id)]`` (:func:`pipeline.collect.sources.task_turns`), else none."""
    rows = []
    for row in iter_trajectory_rows(layout):
        if row["num_actions"] < min_steps or (sources and row["source"] not in sources):
            continue
        rank = hashlib.blake2b(f"{seed}:{row['trajectory_id']}".encode(), digest_size=8).hexdigest()
        rows.append((rank, row))
    rows.sort(key=lambda r: (r[0], r[1]["trajectory_id"]))
    out = []
    for _, row in rows[: limit or None]:
        traj = row_to_trajectory(row)
        turns = recorded_turns(row.get("messages_json")) or tuple(
            (questions or {}).get((traj.env_id, traj.task_id), ())
        )
        out.append(RolloutTask(traj.trajectory_id, traj.task_id, traj.env, traj.actions, turns))
    return out


def write_run(layout: DataLayout, run_id: str, steps: list[dict[str, Any]], rollouts: list[dict[str, Any]]) -> Path:
    """Write a run's step and rollout tables (atomically; same input, same bytes)."""
    directory = run_dir(layout, run_id)
    directory.mkdir(parents=True, exist_ok=True)
    for name, rows, shape in (("steps", steps, STEPS), ("rollouts", rollouts, ROLLOUTS)):
        table = pa.Table.from_pylist([{k: r.get(k) for k in shape.names} for r in rows], schema=shape)
        with atomic_path(directory / f"{name}.parquet") as tmp:
            pq.write_table(table, tmp, compression="zstd")
    return directory


_METRICS = """count(*) AS steps, count(DISTINCT rollout_id) AS rollouts,
  round(100 * avg(fm::INT), 1) AS fm, round(100 * avg(cm::INT), 1) AS cm,
  round(100 * avg(state_match::INT), 1) AS state_match, round(avg(drift), 3) AS mean_drift,
  round(100 * avg(diverged_before::INT), 1) AS diverged_pct, count(*) FILTER (NOT parse_ok) AS parse_failures"""


def sync(con: duckdb.DuckDBPyConnection, layout: DataLayout) -> bool:
    """Create / refresh the rollout views over every run's files; False when there is no run yet."""
    if not any(rollouts_root(layout).glob("*/steps.parquet")):
        return False
    warehouse.sync(con, layout)  # rollout_steps and rollouts, at the data root as it is now
    by_axis = [(f"rollout_by_{a.name}", a.label) for a in AXES if a.by_label and a.label in STEPS.names]
    for name, key in (
        ("rollout_by_simulator", "simulator, agent"),
        *by_axis,
        ("rollout_by_step", "step_index"),
        ("rollout_by_env", "env_id"),
    ):
        con.execute(
            f"CREATE OR REPLACE VIEW {name} AS SELECT run_id, {key}, {_METRICS} FROM rollout_steps GROUP BY ALL "
            "ORDER BY ALL"
        )
    catalog.describe(con)
    return True


def summary(con: duckdb.DuckDBPyConnection, run_ids: list[str]) -> Any:
    """Per run: rollouts, steps, FM / CM, mean drift, parse failures, divergence and how rollouts ended."""
    return con.execute(
        """WITH r AS (
             SELECT run_id, count(*) FILTER (first_divergence IS NOT NULL) AS diverged_rollouts,
                    round(avg(first_divergence), 2) AS mean_first_divergence,
                    round(avg(final_drift), 2) AS mean_final_drift
             FROM rollouts GROUP BY run_id),
           st AS (
             SELECT run_id, string_agg(status || ':' || n, ' ' ORDER BY status) AS statuses
             FROM (SELECT run_id, status, count(*) AS n FROM rollouts GROUP BY ALL) GROUP BY run_id)
           SELECT s.run_id, s.rollouts, s.steps, s.fm, s.cm, s.mean_drift, s.parse_failures,
                  r.diverged_rollouts, r.mean_first_divergence, r.mean_final_drift, st.statuses
           FROM rollout_by_simulator s JOIN r USING (run_id) JOIN st USING (run_id)
           WHERE s.run_id IN (SELECT unnest(?)) ORDER BY s.run_id""",
        [run_ids],
    ).df()


def drift_plot(con: duckdb.DuckDBPyConnection, run_ids: list[str], path: Path) -> str:
    """Mean drift |diff(ŝ, s)| against step index, one line per run; writes ``path``, returns base64 PNG."""
    df = con.execute(
        "SELECT run_id, step_index, mean_drift, steps FROM rollout_by_step WHERE run_id IN (SELECT unnest(?)) "
        "ORDER BY run_id, step_index",
        [run_ids],
    ).df()

    def draw(ax: Any) -> None:
        for rid, part in df.groupby("run_id"):
            part = part.sort_values("step_index")
            ax.plot(part["step_index"], part["mean_drift"], marker="o", label=str(rid))

    return line_plot(
        path,
        draw,
        "step index",
        "mean state drift |diff(ŝ, s)|",
        title="Simulated rollouts: drift of the simulated state from the executor's",
        metadata={"Software": None},
        data=df.to_csv(index=False),
    )
