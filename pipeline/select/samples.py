"""Materialise full samples (s_t, a_t, code(a_t), o_t, s'_t, Δ, labels) for the picked steps only.

One streaming pass, so memory stays bounded by a few MiB of samples whatever the corpus and split size:

1. the picked rows of the strata and step tables (no states there: small rows) and the Δs of every
   step up to the last picked one of each needed trajectory are read with filtered scans that skip
   row groups without a match;
2. the initial states of the needed trajectories are read row group by row group; each trajectory is
   replayed with structure-sharing Δ application (:func:`pipeline.core.delta.apply`) and an
   incremental canonical-JSON writer, and every rebuilt s_t / s'_t is verified against its hash;
3. finished rows are handed to a background thread that encodes and compresses them while the next
   trajectories replay.

Rows are stored in the order of the labeled data (trajectory, then step): deterministic for a given
input, and free of a sort. ``position`` keeps each sample's place in the pick order (strata in
composition order, environment-diverse picks within), as ``sample_ids.txt`` lists them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.core.clock import step_time
from pipeline.core.canonical import CanonicalTextCache, text_hash
from pipeline.core.delta import DeltaError, apply
from pipeline.store import schema
from pipeline.store.layout import DataLayout
from pipeline.store.memory import use_returning_pool
from pipeline.store.parquet_io import BackgroundWrites, atomic_path

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
        # the frozen wall clock during the action (ISO 8601, UTC): freeze.step_time(clock_start, step_index);
        # null for samples without a recorded clock (imported reference data)
        pa.field("current_time", pa.string()),
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
_STATE_COLUMNS = ("state_before_json", "state_after_json")
FLUSH_BYTES = 4 * 2**20  # rebuilt state texts held before they are handed to the writer


class SampleError(ValueError):
    """A picked sample cannot be rebuilt faithfully."""


def materialize_samples(
    layout: DataLayout,
    picks: Sequence[tuple[str, str]],
    strata_path: Path,
    out: Path,
) -> int:
    """Write the samples of ``picks`` (``(step_id, stratum)`` in pick order) to ``out``; returns the count."""
    use_returning_pool()
    if not picks:
        with atomic_path(out) as tmp:
            pq.write_table(SAMPLE.empty_table(), tmp, compression="zstd")
        return 0
    picked_ids = pa.array([p[0] for p in picks], pa.string())
    strata = _scan([str(strata_path)], _STRATA_COLUMNS, "step_id", picked_ids).sort_by("step_id")
    needed = pc.unique(strata.column("trajectory_id"))
    steps = _scan(layout.step_parts(), _STEP_COLUMNS, "trajectory_id", needed).sort_by(
        [("trajectory_id", "ascending"), ("step_index", "ascending")])
    rows = steps.filter(pc.is_in(steps.column("step_id"), value_set=picked_ids))
    if rows.num_rows != len(picks) or strata.num_rows != len(picks):
        raise SampleError(f"found {rows.num_rows} of {len(picks)} picked steps in the step table and {strata.num_rows} in "
                          "the strata table; was the step table relabeled underneath? re-materialize step_strata")
    rows = _with_labels(layout, rows, strata, picks)
    with atomic_path(out) as tmp, pq.ParquetWriter(tmp, SAMPLE, compression="zstd") as writer:
        with BackgroundWrites() as background:
            _replay_into(layout, rows, steps.select(["trajectory_id", "step_index", "step_id", "delta"]),
                         lambda table: background.submit(writer.write_table, table, 256))
    return len(picks)


_STRATA_COLUMNS = ["step_id", "trajectory_id", "task_id", "env_id", "source", "delta_bucket", "args_cardinality", "sample_hash"]
_STEP_COLUMNS = ["step_id", "trajectory_id", "step_index", "tool", "arguments_json", "args_count", "code_ref",
                 "raw_observation", "observation_json", "outcome", "delta", "delta_size", "state_before_hash",
                 "state_after_hash"]


def _scan_batches(files: Sequence[str], columns: list[str], key: str, values: pa.Array):
    """The rows of ``files`` whose ``key`` is in ``values``, one filtered row group at a time. Row
    groups without a match are skipped after reading only their ``key`` column."""
    for path in files:
        pf = pq.ParquetFile(path)
        for group in range(pf.metadata.num_row_groups):
            if not pc.any(pc.is_in(pf.read_row_group(group, columns=[key]).column(0), value_set=values)).as_py():
                continue
            table = pf.read_row_group(group, columns=columns)
            yield from table.filter(pc.is_in(table.column(key), value_set=values)).to_batches()
            del table


def _scan(files: Sequence[str], columns: list[str], key: str, values: pa.Array) -> pa.Table:
    """Rows of ``files`` whose ``key`` is in ``values`` (see :func:`_scan_batches`)."""
    parts = list(_scan_batches(files, columns, key, values))
    if not parts:
        return pq.read_schema(files[0]).empty_table().select(columns) if files else pa.table({})
    return pa.Table.from_batches(parts)


def _with_labels(layout: DataLayout, rows: pa.Table, strata: pa.Table, picks: Sequence[tuple[str, str]]) -> pa.Table:
    """Picked step rows (ordered by trajectory, step) with their strata labels, position, stratum and code."""
    order = {step_id: (i, stratum) for i, (step_id, stratum) in enumerate(picks)}
    by_id = rows.sort_by("step_id")
    ids = by_id.column("step_id").to_pylist()
    labelled = by_id.append_column("position", pa.array([order[i][0] for i in ids], pa.int32()))
    labelled = labelled.append_column("stratum", pa.array([order[i][1] for i in ids], pa.string()))
    for name in ("task_id", "env_id", "source", "delta_bucket", "args_cardinality", "sample_hash"):
        labelled = labelled.append_column(name, strata.column(name))
    refs = labelled.column("code_ref").to_pylist()
    code = _code(layout, {r for r in refs if r})
    labelled = labelled.append_column("code", pa.array([code.get(r) if r else None for r in refs], pa.string()))
    return labelled.sort_by([("trajectory_id", "ascending"), ("step_index", "ascending")])


def _code(layout: DataLayout, refs: set[str]) -> dict[str, str]:
    if not refs or not layout.tool_code.exists():
        return {}
    table = _scan([str(layout.tool_code)], ["code_ref", "code"], "code_ref", pa.array(sorted(refs), pa.string()))
    return dict(zip(table.column("code_ref").to_pylist(), table.column("code").to_pylist()))


def _replay_into(layout: DataLayout, rows: pa.Table, replay: pa.Table, emit: Callable[[pa.Table], None]) -> None:
    """Rebuild s_t / s'_t of every row of ``rows`` (ordered by trajectory id, step) and ``emit`` the
    finished samples (``SAMPLE`` tables) in the order the trajectories are stored."""
    traj_ids = replay.column("trajectory_id").to_pylist()
    step_idx = replay.column("step_index").to_pylist()
    step_ids = replay.column("step_id").to_pylist()
    deltas = replay.column("delta").to_pylist()
    spans: dict[str, tuple[int, int]] = {}
    for i, tid in enumerate(traj_ids):
        start = spans.get(tid, (i, i))[0]
        spans[tid] = (start, i + 1)
    row_traj = rows.column("trajectory_id").to_pylist()
    row_step = rows.column("step_index").to_pylist()
    before_hash = rows.column("state_before_hash").to_pylist()
    after_hash = rows.column("state_after_hash").to_pylist()
    row_span: dict[str, tuple[int, int]] = {}
    for i, tid in enumerate(row_traj):
        row_span[tid] = (row_span.get(tid, (i, i))[0], i + 1)
    texts: dict[int, tuple[str, str]] = {}  # row -> (before, after) in emission order, flushed every few MiB
    times: dict[int, str | None] = {}  # row -> current_time

    def flush() -> None:
        if not texts:
            return
        order = list(texts)
        part = rows.take(pa.array(order, pa.int64()))
        part = part.append_column("state_before_json", pa.array([texts[i][0] for i in order], pa.string()))
        part = part.append_column("state_after_json", pa.array([texts[i][1] for i in order], pa.string()))
        part = part.append_column("current_time", pa.array([times.get(i) for i in order], pa.string()))
        emit(part.select(SAMPLE.names).cast(SAMPLE))
        texts.clear()
        times.clear()  # every row with a time is in ``texts``: flushed trajectories are finished

    files = layout.trajectory_files()
    if not files:
        raise FileNotFoundError(f"no trajectories table under {layout.trajectories_dir}")
    wanted = pa.array(sorted(row_span), pa.string())
    seen = pending = 0
    for tid, initial_json, initial_hash, clock_start in _trajectory_rows(files, wanted):
        if text_hash(initial_json) != initial_hash:
            raise SampleError(f"{tid}: stored initial state does not match its hash")
        lo, hi = row_span[tid]
        picked = {row_step[r]: r for r in range(lo, hi)}
        for r in range(lo, hi):
            times[r] = step_time(clock_start, row_step[r]) if clock_start else None
        _replay_one(tid, initial_json, spans[tid], step_idx, step_ids, deltas, picked, before_hash, after_hash, texts)
        pending += (hi - lo) * 2 * len(initial_json)
        seen += 1
        if pending > FLUSH_BYTES:
            flush()
            pending = 0
    flush()
    if seen != len(row_span):
        raise SampleError(f"{len(row_span) - seen} trajectories of picked steps are missing from the trajectories table")


def _trajectory_rows(files: Sequence[str], wanted: pa.Array):
    """``(trajectory_id, initial_state_json, initial_state_hash, clock_start)`` of the ``wanted``
    trajectories; ``clock_start`` is None in a trajectories file written before clocks were recorded."""
    base = ["trajectory_id", "initial_state_json", "initial_state_hash"]
    for path in files:
        has_clock = "clock_start" in pq.read_schema(path).names
        for batch in _scan_batches([path], base + (["clock_start"] if has_clock else []), "trajectory_id", wanted):
            columns = [batch.column(i).to_pylist() for i in range(batch.num_columns)]
            if not has_clock:
                columns.append([None] * batch.num_rows)
            yield from zip(*columns)


def _replay_one(tid: str, initial_json: str, span: tuple[int, int], step_idx: list[int], step_ids: list[str],
                deltas: list[Any], picked: dict[int, int], before_hash: list[str], after_hash: list[str],
                texts: dict[int, tuple[str, str]]) -> None:
    cache = CanonicalTextCache()  # parsing seeds it with the texts of the initial state's subtrees
    text = cache.text
    state = cache.parse(initial_json)
    current: str | None = initial_json  # canonical text of ``state`` when known
    verified = initial_json  # the last text whose hash was checked (the caller checked the initial one)
    for k in range(*span):
        row = picked.get(step_idx[k])
        if row is not None:
            before = current if current is not None else text(state)
            if before is not verified and text_hash(before) != before_hash[row]:
                raise SampleError(f"{step_ids[k]}: reconstructed s_t does not match its recorded hash")
        try:
            state = apply(_decode(deltas[k]), state)
        except DeltaError as exc:
            raise SampleError(f"{step_ids[k]}: Δ does not apply to the reconstructed s_t: {exc}") from exc
        if row is not None:
            current = text(state)
            if text_hash(current) != after_hash[row]:
                raise SampleError(f"{step_ids[k]}: reconstructed s'_t does not match its recorded hash")
            verified = current
            texts[row] = (before, current)
        else:
            current = None if deltas[k] else current


def _decode(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"op": r["op"], "path": r["path"],
             "before": None, "after": None if r["after"] is None else json.loads(r["after"])} for r in records]
