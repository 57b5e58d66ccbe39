"""A strata table written directly, for selection tests on corpora shaped like real ones (many exploration
episodes per scenario, small |Δ|, no failures…): the selection reads only the strata table and the
benchmark's samples. A version's samples file is written from the strata rows (:func:`samples_from_strata`)
in place of the full-state rebuild, which these synthetic steps have no states for."""

from __future__ import annotations

import hashlib
import json

import duckdb
import pandas as pd
import pytest

from pipeline.core.strata import args_cardinality, balance2_group, benchmark_cell, delta_bucket
from pipeline.select import samples
from pipeline.store.layout import DataLayout


def sha(*parts: object) -> str:
    return hashlib.md5("|".join(map(str, parts)).encode()).hexdigest()


def step_row(
    env: str,
    task: str,
    trajectory: str,
    index: int,
    outcome: str,
    delta: int,
    args: int,
    state: str,
    tool: str,
    arguments: str,
) -> dict:
    """A strata-table row, its labels from the strata rules and its sample hash from (s_t, tool, arguments)."""
    return {
        "step_id": f"{trajectory}#{index}",
        "trajectory_id": trajectory,
        "task_id": task,
        "env_id": env,
        "source": "envscaler",
        "tool": tool,
        "step_index": index,
        "outcome": outcome,
        "delta_size": delta,
        "delta_bucket": delta_bucket(delta),
        "args_count": args,
        "args_cardinality": args_cardinality(args),
        "benchmark_cell": benchmark_cell(outcome, delta, args),
        "balance2_group": balance2_group(outcome, delta),
        "excluded": False,
        "excluded_reason": None,
        "state_before_hash": state,
        "state_after_hash": sha(state, tool, arguments),
        "sample_hash": sha(state, tool, arguments),
    }


def samples_from_strata(layout, picks, strata_path, out) -> int:
    """The picked strata rows as a split's samples (position, stratum, ids, labels, sample hash)."""
    con = duckdb.connect()
    picked = pd.DataFrame([{"step_id": s, "stratum": st, "position": i} for i, (s, st) in enumerate(picks)])
    con.register("picked", picked)
    con.execute(f"""COPY (SELECT p.position, p.stratum, s.* FROM picked p JOIN read_parquet('{strata_path}') s
                          USING (step_id) ORDER BY p.position) TO '{out}' (FORMAT parquet)""")
    return len(picks)


@pytest.fixture
def corpus_layout(tmp_path, monkeypatch):
    """A function writing a strata table (and its manifest) at a fresh data root."""
    monkeypatch.setattr(samples, "materialize_samples", samples_from_strata)

    def write(df: pd.DataFrame, name: str = "data") -> DataLayout:
        layout = DataLayout.at(tmp_path / name)
        layout.strata.parent.mkdir(parents=True, exist_ok=True)
        df.sort_values("step_id").to_parquet(layout.strata, index=False)
        layout.strata_manifest.write_text(
            json.dumps({"fingerprint": sha(name, len(df)), "steps": len(df), "usable": len(df)})
        )
        return layout

    return write
