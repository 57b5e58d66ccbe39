"""Materialise full samples (s_t, a_t, code(a_t), o_t, s'_t, Δ, labels) for selected steps.

States are rebuilt from each trajectory's initial state and its Δs and verified against the
recorded hashes; rows are streamed to a temporary file in trajectory order, then written in pick
order by DuckDB.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from pipeline.state.canonical import canonical_json, state_hash
from pipeline.store import schema
from pipeline.store.layout import DataLayout
from pipeline.store.parquet_io import atomic_path
from pipeline.store.reconstruct import replay_states
from pipeline.store.trajectories import iter_trajectory_rows

SAMPLE = pa.schema(
    [
        pa.field("position", pa.int32(), nullable=False),
        pa.field("stratum", pa.string(), nullable=False),
        pa.field("step_id", pa.string(), nullable=False),
        pa.field("trajectory_id", pa.string(), nullable=False),
        pa.field("task_id", pa.string(), nullable=False),
        pa.field("env_id", pa.string(), nullable=False),
        pa.field("source", pa.string(), nullable=False),
        pa.field("step_index", pa.int32(), nullable=False),
        pa.field("tool", pa.string(), nullable=False),
        pa.field("arguments_json", pa.string(), nullable=False),
        pa.field("args_count", pa.int32(), nullable=False),
        pa.field("code", pa.string()),
        pa.field("code_ref", pa.string()),
        pa.field("state_before_json", pa.string(), nullable=False),
        pa.field("state_after_json", pa.string(), nullable=False),
        pa.field("raw_observation", pa.string(), nullable=False),
        pa.field("observation_json", pa.string()),
        pa.field("outcome", pa.string(), nullable=False),
        pa.field("delta", schema.DELTA, nullable=False),
        pa.field("delta_size", pa.int32(), nullable=False),
        pa.field("delta_bucket", pa.string(), nullable=False),
        pa.field("args_cardinality", pa.string(), nullable=False),
        pa.field("state_before_hash", pa.string(), nullable=False),
        pa.field("state_after_hash", pa.string(), nullable=False),
        pa.field("sample_hash", pa.string(), nullable=False),
    ]
)

_STEP_COLUMNS = ["step_id", "trajectory_id", "step_index", "tool", "arguments_json", "args_count", "code_ref",
                 "raw_observation", "observation_json", "outcome", "delta", "delta_size",
                 "state_before_hash", "state_after_hash"]


def materialize_samples(layout: DataLayout, picks: list[dict[str, Any]], out: Path, batch: int = 200) -> int:
    """``picks``: rows of the strata table plus ``position`` and ``stratum``. Returns rows written."""
    by_traj: dict[str, dict[int, dict[str, Any]]] = {}
    for pick in picks:
        by_traj.setdefault(pick["trajectory_id"], {})[pick["step_index"]] = pick
    code = _code(layout)
    steps_ds = ds.dataset(layout.step_parts(), format="parquet")
    ids = sorted(by_traj)
    unordered = out.with_name(f".{out.name}.unordered")
    out.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    with pq.ParquetWriter(unordered, SAMPLE) as writer:
        for start in range(0, len(ids), batch):
            chunk = ids[start : start + batch]
            initial = {r["trajectory_id"]: r["initial_state_json"] for r in iter_trajectory_rows(
                layout, columns=["trajectory_id", "initial_state_json"], ids=chunk)}
            table = steps_ds.to_table(columns=_STEP_COLUMNS, filter=ds.field("trajectory_id").isin(chunk))
            steps: dict[str, list[dict[str, Any]]] = {}
            for row in table.to_pylist():
                steps.setdefault(row["trajectory_id"], []).append(row)
            rows = []
            for tid in chunk:
                wanted = by_traj[tid]
                last = max(wanted)
                ordered = sorted((s for s in steps.get(tid, []) if s["step_index"] <= last), key=lambda s: s["step_index"])
                for step, before, after in replay_states(json.loads(initial[tid]), ordered):
                    pick = wanted.get(step["step_index"])
                    if pick is None:
                        continue
                    if state_hash(before) != step["state_before_hash"] or state_hash(after) != step["state_after_hash"]:
                        raise ValueError(f"{step['step_id']}: reconstructed state does not match its recorded hash")
                    rows.append({
                        **{k: step[k] for k in _STEP_COLUMNS if k in SAMPLE.names},
                        "position": pick["position"], "stratum": pick["stratum"], "task_id": pick["task_id"],
                        "env_id": pick["env_id"], "source": pick["source"], "code": code.get(step["code_ref"]),
                        "state_before_json": canonical_json(before), "state_after_json": canonical_json(after),
                        "delta_bucket": pick["delta_bucket"], "args_cardinality": pick["args_cardinality"],
                        "sample_hash": pick["sample_hash"],
                    })
            if rows:
                writer.write_table(pa.Table.from_pylist(rows, schema=SAMPLE))
                written += len(rows)
    if written != len(picks):
        unordered.unlink(missing_ok=True)
        raise ValueError(f"materialised {written} of {len(picks)} picked samples; the step table changed underneath?")
    with atomic_path(out) as tmp:
        duckdb.connect().execute(
            f"COPY (SELECT * FROM read_parquet('{unordered}') ORDER BY position) TO '{tmp}' (FORMAT parquet, COMPRESSION zstd)"
        )
    unordered.unlink()
    return written


def _code(layout: DataLayout) -> dict[str, str]:
    if not layout.tool_code.exists():
        return {}
    t = pq.read_table(layout.tool_code, columns=["code_ref", "code"])
    return dict(zip(t.column("code_ref").to_pylist(), t.column("code").to_pylist()))
