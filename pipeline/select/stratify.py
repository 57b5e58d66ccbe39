"""The strata table: every labeled step with outcome, |Δ| bucket, argument cardinality, its default
benchmark cell and Balance2 group, exclusion reason, and the (s_t, a_t) sample hash.

Written by DuckDB straight from the step parts (a scan, never a Python list of steps), ordered by
``step_id`` so identical input gives an identical table. The *input fingerprint* — the content keys
of the step parts — identifies the labeled data a split was drawn from.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from typing import TYPE_CHECKING

from pipeline.labeling.determinism import excluded_files
from pipeline.labeling.empty import why_empty
from pipeline.store.duck import connect
from pipeline.store.layout import DataLayout
from pipeline.store.memory import use_returning_pool
from pipeline.store.parquet_io import atomic_path
from pipeline.core.strata import ARGS_CARDINALITY_SQL, BALANCE2_GROUP_SQL, BENCHMARK_CELL_SQL, BEYOND_SQL, DELTA_BUCKET_SQL
from pipeline.store.queries import tool_spread_sql


if TYPE_CHECKING:
    import pandas as pd


class EmptyStepTable(ValueError):
    """There is nothing to stratify."""


@dataclass(frozen=True)
class StrataReport:
    path: Path
    fingerprint: str
    steps: int
    usable: int


def input_fingerprint(layout: DataLayout) -> str:
    """Content fingerprint of the labeled steps (their parts are named by content keys) and of the
    steps the determinism check excluded (when it excluded any)."""
    parts = sorted(Path(p).name for p in layout.step_parts())
    excluded = _excluded_ids(layout)
    if excluded:
        parts.append("nondeterministic:" + hashlib.blake2b("\n".join(excluded).encode(), digest_size=8).hexdigest())
    return hashlib.blake2b("\n".join(parts).encode(), digest_size=8).hexdigest()


def _excluded_ids(layout: DataLayout) -> list[str]:
    files = excluded_files(layout)
    if not files:
        return []
    rows = connect().execute("SELECT DISTINCT step_id FROM read_parquet(?) ORDER BY step_id", [files]).fetchall()
    return [r[0] for r in rows]


def stratify(layout: DataLayout, min_steps: int = 1) -> StrataReport:
    use_returning_pool()
    parts = layout.step_parts()
    if not parts:
        raise EmptyStepTable(f"no labeled steps under {layout.steps_dir}: {why_empty(layout)}")
    out = layout.strata
    con = connect()
    total = con.execute("SELECT count(*) FROM read_parquet(?)", [parts]).fetchone()[0]
    if total < min_steps:
        raise EmptyStepTable(f"the step table has {total} steps; at least {min_steps} are needed to stratify"
                             + (f": {why_empty(layout)}" if not total else ""))
    nondet = excluded_files(layout)
    nd_join = (f"LEFT JOIN (SELECT step_id AS nd_step, min(reason) AS nd_reason FROM read_parquet({nondet!r}) GROUP BY 1) nd "
               f"ON nd.nd_step = s.step_id") if nondet else "LEFT JOIN (SELECT NULL AS nd_step, NULL AS nd_reason) nd ON false"
    with atomic_path(out) as tmp:
        con.execute(
            f"""COPY (
                SELECT step_id, trajectory_id, task_id, env_id, source, tool, step_index, outcome, delta_size,
                       {DELTA_BUCKET_SQL} AS delta_bucket, args_count, {ARGS_CARDINALITY_SQL} AS args_cardinality,
                       {BENCHMARK_CELL_SQL} AS benchmark_cell, {BALANCE2_GROUP_SQL} AS balance2_group,
                       outcome = 'error' OR nd.nd_step IS NOT NULL AS excluded,
                       CASE WHEN nd.nd_step IS NOT NULL THEN nd.nd_reason WHEN outcome = 'error' THEN 'error'
                            WHEN {BEYOND_SQL} THEN 'beyond' END AS excluded_reason,
                       state_before_hash, state_after_hash,
                       md5(state_before_hash || '|' || tool || '|' || arguments_json) AS sample_hash
                FROM read_parquet(?) s {nd_join} ORDER BY step_id
            ) TO '{tmp}' (FORMAT parquet, COMPRESSION zstd)""",
            [parts],
        )
    usable = con.execute(f"SELECT count(*) FROM read_parquet('{out}') WHERE NOT excluded").fetchone()[0]
    fingerprint = input_fingerprint(layout)
    with atomic_path(layout.strata_manifest) as tmp:
        tmp.write_text(json.dumps({"fingerprint": fingerprint, "steps": total, "usable": usable}))
    return StrataReport(out, fingerprint, total, usable)


def current_fingerprint(layout: DataLayout) -> str:
    path = layout.strata_manifest
    if not path.exists():
        raise EmptyStepTable(f"no strata table at {layout.strata}; materialize 'step_strata' first")
    return json.loads(path.read_text())["fingerprint"]


def cell_table(layout: DataLayout) -> "pd.DataFrame":
    """Counts, distinct environments and distinct (env, tool) pairs (``tool_pairs``; the most frequent one and
    its share of the cell's steps) per (outcome, |Δ| bucket, argument cardinality) cell."""

    con = connect()
    rel = f"read_parquet('{layout.strata}')"
    key = "outcome || '|' || delta_bucket || '|' || args_cardinality"
    return con.execute(
        f"""SELECT c.outcome, c.delta_bucket, c.args_cardinality, c.steps, c.environments, t.tool_pairs, t.top_tool, t.top_tool_share
            FROM (SELECT outcome, delta_bucket, args_cardinality, {key} AS grp, count(*) AS steps,
                         count(DISTINCT env_id) AS environments FROM {rel} GROUP BY ALL) c
            JOIN ({tool_spread_sql(rel, key)}) t USING (grp)
            ORDER BY outcome, delta_bucket, args_cardinality"""
    ).df()


def exclusion_table(layout: DataLayout) -> "pd.DataFrame":
    """Excluded steps per environment and kind of reason (error, beyond, non-deterministic)."""
    con = connect()
    return con.execute(
        f"""SELECT env_id,
                   CASE WHEN excluded_reason LIKE 'non-deterministic%' OR excluded_reason LIKE 'after non-deterministic%'
                        THEN 'non-deterministic' ELSE excluded_reason END AS reason,
                   count(*) AS steps
            FROM read_parquet('{layout.strata}') WHERE excluded GROUP BY ALL ORDER BY reason, env_id"""
    ).df()
