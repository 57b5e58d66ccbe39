"""The strata table: every labeled step with its value and label on every stratification axis (outcome, |Δ|
and |Δ| bucket, argument count and cardinality: :data:`pipeline.core.axes.AXES`), its default benchmark cell
and Balance2 group, exclusion reason, and the (s_t, a_t) sample hash.

Written by DuckDB straight from the step parts (a scan, never a Python list of steps), ordered by
``step_id`` so identical input gives an identical table. The *input fingerprint* — the content keys
of the step parts — identifies the labeled data a split was drawn from.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from pipeline.core.axes import AXES, Axes
from pipeline.core.outcome import EXCLUDED_OUTCOMES, SANDBOX_REFUSED
from pipeline.core.strata import BALANCE2_GROUP_SQL, BENCHMARK_CELL_SQL, BEYOND_SQL, Composition
from pipeline.labeling.empty import why_empty
from pipeline.labeling.quarantine import excluded_files, input_fingerprint
from pipeline.report.tables import Facts, Table
from pipeline.store import queries
from pipeline.store.duck import connect
from pipeline.store.layout import DataLayout
from pipeline.store.memory import use_returning_pool
from pipeline.store.parquet_io import atomic_path

if TYPE_CHECKING:
    import pandas as pd


class EmptyStepTable(ValueError):
    """There is nothing to stratify."""


def stratify(layout: DataLayout, axes: Axes = AXES) -> None:
    """Write the strata table from the step parts: per step its ids, every axis of ``axes`` (value, label),
    default benchmark cell, Balance2 group, exclusion and sample hash (:func:`strata_select`)."""
    use_returning_pool()
    parts = layout.step_parts()
    if not parts:
        raise EmptyStepTable(f"no labeled steps under {layout.steps_dir}: {why_empty(layout)}")
    out = layout.strata
    con = connect()
    total = con.execute("SELECT count(*) FROM read_parquet(?)", [parts]).fetchone()[0]
    if not total:
        raise EmptyStepTable(f"the step table has 0 steps; at least 1 are needed to stratify: {why_empty(layout)}")
    nondet = excluded_files(layout)
    nd_join = (
        (
            f"LEFT JOIN (SELECT step_id AS nd_step, min(reason) AS nd_reason FROM read_parquet({nondet!r}) "
            "GROUP BY 1) nd ON nd.nd_step = s.step_id"
        )
        if nondet
        else "LEFT JOIN (SELECT NULL AS nd_step, NULL AS nd_reason) nd ON false"
    )
    with atomic_path(out) as tmp:
        con.execute(
            f"COPY ({strata_select(axes, 'read_parquet(?)', nd_join)}) TO '{tmp}' (FORMAT parquet, COMPRESSION zstd)",
            [parts],
        )
    usable = con.execute(f"SELECT count(*) FROM read_parquet('{out}') WHERE NOT excluded").fetchone()[0]
    with atomic_path(layout.strata_manifest) as tmp:
        tmp.write_text(json.dumps({"fingerprint": input_fingerprint(layout), "steps": total, "usable": usable}))


def strata_facts(layout: DataLayout, composition: Composition) -> Facts:
    """What stratifying reports (``step_strata``'s metadata): steps, usable ones and the input fingerprint (the
    strata manifest's), the cells, the exclusions per environment (the non-deterministic ones also a warning),
    and the candidates per benchmark cell and Balance2 group of ``composition``."""
    manifest = json.loads(layout.strata_manifest.read_text())
    exclusions = exclusion_table(layout)
    nondet = exclusions[exclusions["reason"] == "non-deterministic"]
    excluded = int(nondet["steps"].sum()) if len(nondet) else 0
    warning = f"{excluded} non-deterministic steps excluded from the splits in {len(nondet)} environment(s): "
    return Facts(
        {
            "steps": manifest["steps"],
            "usable_steps": manifest["usable"],
            "input_fingerprint": manifest["fingerprint"],
            "cells": Table.of_frame(cell_table(layout)),
            "nondeterministic_excluded": excluded,
            "excluded_by_env": Table.of_frame(exclusions),
            "benchmark_cell_candidates": Table.of_frame(queries.cell_coverage(layout, composition)),
            "balance2_candidates": Table.of_frame(queries.balance2_coverage(layout, composition)),
            "path": layout.strata.resolve(),
        },
        [warning + ", ".join(nondet["env_id"])] if len(nondet) else [],
    )


_EXCLUDED = ", ".join(f"'{o}'" for o in EXCLUDED_OUTCOMES)  # outcomes no split takes, as SQL


def strata_select(axes: Axes, steps: str, nd_join: str) -> str:
    """The strata table's SELECT over the relation ``steps`` (joined to the non-deterministic steps by
    ``nd_join``), ordered by ``step_id``: the axis columns are generated from ``axes``."""
    return f"""SELECT step_id, trajectory_id, task_id, env_id, source, adapter, tool, step_index, {axes.strata_sql()},
                       {BENCHMARK_CELL_SQL} AS benchmark_cell, {BALANCE2_GROUP_SQL} AS balance2_group,
                       outcome IN ({_EXCLUDED}) OR nd.nd_step IS NOT NULL AS excluded,
                       CASE WHEN outcome = '{SANDBOX_REFUSED}' THEN outcome
                            WHEN nd.nd_step IS NOT NULL THEN nd.nd_reason
                            WHEN outcome IN ({_EXCLUDED}) THEN outcome
                            WHEN {BEYOND_SQL} THEN 'beyond' END AS excluded_reason,
                       state_before_hash, state_after_hash,
                       md5(state_before_hash || '|' || tool || '|' || arguments_json) AS sample_hash
                FROM {axes.relation(steps)} s {nd_join} ORDER BY step_id"""


def current_fingerprint(layout: DataLayout) -> str:
    path = layout.strata_manifest
    if not path.exists():
        raise EmptyStepTable(f"no strata table at {layout.strata}; materialize 'step_strata' first")
    return json.loads(path.read_text())["fingerprint"]


def cell_table(layout: DataLayout) -> pd.DataFrame:
    """Counts, distinct environments and distinct (env, tool) pairs (``tool_pairs``; the most frequent one and
    its share of the cell's steps) per strata cell: (outcome, |Δ| bucket, argument cardinality), the key of
    every axis (:meth:`~pipeline.core.axes.Axes.key_columns`)."""

    con = connect()
    rel = f"read_parquet('{layout.strata}')"
    keys = AXES.key_columns()
    key = " || '|' || ".join(keys)
    return con.execute(
        f"""SELECT {", ".join(f"c.{k}" for k in keys)}, c.steps, c.environments, t.tool_pairs, t.top_tool,
            t.top_tool_share
            FROM (SELECT {", ".join(keys)}, {key} AS grp, count(*) AS steps,
                         count(DISTINCT env_id) AS environments FROM {rel} GROUP BY ALL) c
            JOIN ({queries.tool_spread_sql(rel, key)}) t USING (grp)
            ORDER BY {", ".join(keys)}"""
    ).df()


def exclusion_table(layout: DataLayout) -> pd.DataFrame:
    """Excluded steps per environment and kind of reason (error, beyond, non-deterministic, quality gate)."""
    con = connect()
    return con.execute(
        f"""SELECT env_id,
                   CASE WHEN excluded_reason LIKE 'non-deterministic%'
                   OR excluded_reason LIKE 'after non-deterministic%'
                        THEN 'non-deterministic'
                        WHEN excluded_reason LIKE 'quality gate:%' THEN 'quality gate'
                        ELSE excluded_reason END AS reason,
                   count(*) AS steps
            FROM read_parquet('{layout.strata}') WHERE excluded GROUP BY ALL ORDER BY reason, env_id"""
    ).df()
