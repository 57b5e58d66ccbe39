"""Materialise full samples (s_t, a_t, code(a_t), o_t, s'_t, Δ, labels) for the picked steps only.

One streaming pass, so memory stays bounded by a few MiB of samples whatever the corpus and split size:

1. the picked rows of the strata and step tables (no states there: small rows) and the Δs of every
   step of each needed trajectory are read with DuckDB scans filtered on their key: DuckDB reads the key
   column first and decodes the other columns only where it matches, under the process's memory cap;
2. the initial states of the needed trajectories are streamed the same way, in the order of the
   trajectories files, a few hundred at a time; each trajectory is
   replayed by :func:`pipeline.store.reconstruct.replay` (structure-sharing Δ application, an
   incremental canonical-JSON writer), which verifies every rebuilt s_t / s'_t against its hash;
3. finished rows are handed to a background thread that encodes and compresses them while the next
   trajectories replay.

Rows are stored in the order of the labeled data (trajectory, then step): deterministic for a given
input, and free of a sort. ``position`` keeps each sample's place in the pick order (strata in
composition order, environment-diverse picks within), as ``sample_ids.txt`` lists them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.core.axes import AXES
from pipeline.core.clock import step_time
from pipeline.store import schema
from pipeline.store.duck import connect
from pipeline.store.layout import DataLayout
from pipeline.store.memory import use_returning_pool
from pipeline.store.parquet_io import BackgroundWrites, atomic_path
from pipeline.store.reconstruct import ReplayError, replay
from pipeline.store.schema import SAMPLE
from pipeline.store.verdicts import code_digest, file_digest, kept, labeled_digests

FLUSH_BYTES = 4 * 2**20  # rebuilt state texts held before they are handed to the writer


class SampleError(ValueError):
    """A picked sample cannot be rebuilt faithfully."""


def kept_samples(layout: DataLayout, picks: Sequence[tuple[str, str]], out: Path) -> int:
    """:func:`materialize_samples` of ``picks`` into ``out`` (a split version's ``samples.parquet``), once per content
    of what it reads — the picks, the strata table, the step parts and the trajectory files (their bytes) — and the
    ``pipeline`` package's code: a run that selects a version again (a rerun, a resumed run) finds its samples
    written and keeps them, unless the file is missing or not the bytes written (then it is written again). The key
    is kept in ``quality/samples/<version>.json``. Returns the count."""
    inputs = {
        "picks": hashlib.blake2b("".join(f"{s}\t{g}\n" for s, g in picks).encode(), digest_size=16).hexdigest(),
        "strata": file_digest(layout.strata),
        **labeled_digests(layout),
        "code": code_digest(),
    }

    def written() -> dict[str, Any]:
        count = materialize_samples(layout, picks, layout.strata, out)
        return {"count": count, "digest": file_digest(out)}

    def found(doc: dict[str, Any], _: str) -> dict[str, Any]:
        if file_digest(out) != doc["digest"]:  # a missing file raises OSError: written again, as is this
            raise ValueError(f"{out} is not the samples written")
        return doc

    return int(kept(layout.quality_dir / "samples" / f"{out.parent.name}.json", inputs, written, dict, found)["count"])


def materialize_samples(layout: DataLayout, picks: Sequence[tuple[str, str]], strata_path: Path, out: Path) -> int:
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
        [("trajectory_id", "ascending"), ("step_index", "ascending")]
    )
    rows = steps.filter(pc.is_in(steps.column("step_id"), value_set=picked_ids))
    if rows.num_rows != len(picks) or strata.num_rows != len(picks):
        raise SampleError(
            f"found {rows.num_rows} of {len(picks)} picked steps in the step table and {strata.num_rows} in "
            "the strata table; was the step table relabeled underneath? re-materialize step_strata"
        )
    rows = _with_labels(layout, rows, strata, picks)
    with atomic_path(out) as tmp, pq.ParquetWriter(tmp, SAMPLE, compression="zstd") as writer:
        with BackgroundWrites() as background:
            _replay_into(
                layout,
                rows,
                steps.select(_REPLAY_COLUMNS),
                lambda table: background.submit(writer.write_table, table, 256),
            )
    return len(picks)


#: what a sample takes from the strata table: its ids, the axes' labels and the (s_t, a_t) hash
_STRATA_COLUMNS = [
    "step_id",
    "trajectory_id",
    "task_id",
    "env_id",
    "source",
    "adapter",
    *AXES.label_columns,
    "sample_hash",
]
#: the step-table columns a sample takes (task, environment, source and adapter come with the strata labels)
_STEP_COLUMNS = [n for n in SAMPLE.names if n in schema.STEPS.names and n not in _STRATA_COLUMNS[2:]]
#: what the replay reads of every step: which step, then a store.reconstruct.StoredStep
_REPLAY_COLUMNS = ["trajectory_id", "step_index", "step_id", "delta", "state_before_hash", "state_after_hash"]


#: rows of a DuckDB result handed over at a time (initial states: a few MiB per batch)
_BATCH_ROWS = 256


def _key_filter(con: duckdb.DuckDBPyConnection, key: str, values: pa.Array) -> str:
    """``key IN (…)`` over the Arrow array ``values`` (registered with ``con``): DuckDB reads ``key`` first and
    decodes the other columns only where it matches (row groups and vectors without a match are skipped)."""
    con.register("wanted_keys", pa.table({"k": values}))
    return f"{key} IN (SELECT k FROM wanted_keys)"


def _scan(files: Sequence[str], columns: list[str], key: str, values: pa.Array) -> pa.Table:
    """Rows of ``files`` whose ``key`` is in ``values`` (in no particular order; callers sort), with the files'
    column types. One DuckDB scan under the process's memory cap, on every core."""
    if not files:
        return pa.table({})
    target = pq.read_schema(files[0])
    target = pa.schema([target.field(c) for c in columns])
    with connect() as con:
        table = con.sql(
            f"SELECT {', '.join(columns)} FROM read_parquet(?) WHERE {_key_filter(con, key, values)}",
            params=[list(files)],
        ).to_arrow_table()
    return table.cast(target)


def _with_labels(layout: DataLayout, rows: pa.Table, strata: pa.Table, picks: Sequence[tuple[str, str]]) -> pa.Table:
    """Picked step rows (ordered by trajectory, step) with their strata labels, position, stratum and code."""
    order = {step_id: (i, stratum) for i, (step_id, stratum) in enumerate(picks)}
    by_id = rows.sort_by("step_id")
    ids = by_id.column("step_id").to_pylist()
    labelled = by_id.append_column("position", pa.array([order[i][0] for i in ids], pa.int32()))
    labelled = labelled.append_column("stratum", pa.array([order[i][1] for i in ids], pa.string()))
    for name in _STRATA_COLUMNS[2:]:
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


def _replay_into(layout: DataLayout, rows: pa.Table, replay_table: pa.Table, emit: Callable[[pa.Table], None]) -> None:
    """Rebuild s_t / s'_t of every row of ``rows`` (ordered by trajectory id, step) and ``emit`` the
    finished samples (``SAMPLE`` tables) in the order the trajectories are stored."""
    step_idx = replay_table.column("step_index").to_pylist()
    # store.reconstruct.StoredStep
    stored = list(zip(*(replay_table.column(c).to_pylist() for c in _REPLAY_COLUMNS[2:])))
    spans = _spans(replay_table)
    row_step = rows.column("step_index").to_pylist()
    row_span = _spans(rows)
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
        lo, hi = row_span[tid]
        first, last = spans[tid]
        picked = {row_step[r]: r for r in range(lo, hi)}
        at = {k - first: picked[step_idx[k]] for k in range(first, last) if step_idx[k] in picked}  # position -> row
        for r in range(lo, hi):
            times[r] = step_time(clock_start, row_step[r]) if clock_start else None
        try:
            for i, _, _, before, after in replay(tid, initial_json, initial_hash, stored[first:last], at):
                texts[at[i]] = (before, after)
        except ReplayError as exc:
            raise SampleError(str(exc)) from exc
        pending += (hi - lo) * 2 * len(initial_json)
        seen += 1
        if pending > FLUSH_BYTES:
            flush()
            pending = 0
    flush()
    if seen != len(row_span):
        raise SampleError(
            f"{len(row_span) - seen} trajectories of picked steps are missing from the trajectories table"
        )


def _spans(table: pa.Table) -> dict[str, tuple[int, int]]:
    """Each trajectory's ``(first, end)`` row range in ``table`` (ordered by trajectory)."""
    spans: dict[str, tuple[int, int]] = {}
    for i, tid in enumerate(table.column("trajectory_id").to_pylist()):
        spans[tid] = (spans.get(tid, (i, i))[0], i + 1)
    return spans


def _trajectory_rows(files: Sequence[str], wanted: pa.Array):
    """``(trajectory_id, initial_state_json, initial_state_hash, clock_start)`` of the ``wanted`` trajectories, in the
    order of the files; ``clock_start`` is None in a trajectories file written before clocks were recorded. Streamed
    from one DuckDB scan (initial states of unwanted trajectories are never decoded), a batch of rows at a time."""
    base = ["trajectory_id", "initial_state_json", "initial_state_hash"]
    for path in files:
        clock = "clock_start" if "clock_start" in pq.read_schema(path).names else "NULL::VARCHAR AS clock_start"
        with connect() as con:
            reader = con.sql(
                f"SELECT {', '.join(base)}, {clock} FROM read_parquet(?, file_row_number = true) "
                f"WHERE {_key_filter(con, 'trajectory_id', wanted)} ORDER BY file_row_number",
                params=[path],
            ).to_arrow_reader(_BATCH_ROWS)
            for batch in reader:
                yield from zip(*(batch.column(i).to_pylist() for i in range(batch.num_columns)))
