"""Labeling stage: write the steps table, one labeled row per call of every collected trajectory. A trajectory
collection already labeled under this run's configuration keeps those labels (``Prelabels``); the others are executed
again in the sandbox and labeled from that execution.

The steps table is written as resumable parts: trajectories are taken in table order in chunks, each chunk's part file
is named by a content key (labeler version, limits, source code versions, trajectory fingerprints). A part that exists
is reused, so re-running is idempotent and an interrupted run resumes where it stopped; parts from older inputs are
removed only after a run completes. A part's sidecar (``.issues.json``) keeps its issues, call timings and the
trajectories the stage *executed* (``executed``; the others' labels were kept from collection), which tells the
determinism check which labels come from a second execution (:func:`executed_at_labeling`).

Partitioned (``ENVSIM_SHARDS``; a partition-scoped ``DataLayout``): only the partition's trajectories are labeled, into
``steps/part-<partition>-<key>.parquet``, and the clean-up touches only that partition's parts — plus parts no current
trajectory file can own (an unpartitioned run's, a partition whose trajectories are gone after a change of
``ENVSIM_SHARDS``). Other partitions' parts, which their own runs may be writing right now, are never removed.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.core.issues import TaskIssue
from pipeline.core.progress import Log, Progress
from pipeline.core.strata import Composition
from pipeline.core.trajectory import Trajectory
from pipeline.envs.catalog import load_blobs
from pipeline.execution.child import Limits
from pipeline.execution.sandbox import Sandbox
from pipeline.labeling.rows import CodeRefs, Prelabels, label_config, step_row, trajectory_issues
from pipeline.report.tables import Facts, Table
from pipeline.store import queries, schema
from pipeline.store.layout import DataLayout, step_part_partition
from pipeline.store.parquet_io import atomic_path, write_arrow, write_table
from pipeline.store.trajectories import iter_trajectory_rows, row_to_trajectory


@dataclass
class LabelReport:
    trajectories: int = 0
    steps: int = 0
    parts_written: int = 0
    parts_reused: int = 0
    stale_parts_removed: int = 0
    prelabeled: int = 0  # trajectories whose labels were kept from collection (not executed again)
    issues: list[TaskIssue] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def steps_per_second(self) -> float:
        return self.steps / self.seconds if self.seconds else 0.0

    def facts(self, layout: DataLayout, composition: Composition) -> Facts:
        """What a labeling reports (the ``labeled_steps`` metadata): its counts, the step table's totals, |Δ| by
        outcome, the candidates per benchmark cell and Balance2 group of ``composition``, the environments covered
        and the trajectories that could not be labeled (each also a warning)."""
        totals = queries.step_totals(layout) if queries.has_steps(layout) else {}
        labeled = bool(totals.get("steps"))
        pivot = queries.delta_by_outcome(layout) if labeled else None
        hist = {} if pivot is None else {k: int(v) for k, v in pivot["total"].items() if k != "total"}

        def table(frame: Callable[[], pd.DataFrame], empty: str) -> Table:
            return Table.of_frame(frame()) if labeled else Table([], [empty])

        return Facts(
            {
                "steps": self.steps,
                "trajectories": self.trajectories,
                "environments": totals.get("environments", 0),
                "tools": totals.get("tools", 0),
                "max_delta": totals.get("max_delta", 0),
                "parts_written": self.parts_written,
                "parts_reused": self.parts_reused,
                "trajectories_labeled_at_collection": self.prelabeled,  # each call executed once
                "steps_per_second": round(self.steps_per_second, 1),
                "delta_by_outcome": table(lambda: pivot.rename_axis("delta_size").reset_index(), "delta_size"),
                "delta_histogram": Table(
                    [{"delta_size": k, "count": n} for k, n in hist.items()], ["delta_size", "count"]
                ),
                "benchmark_cell_candidates": table(lambda: queries.cell_coverage(layout, composition), "cell"),
                "balance2_candidates": table(lambda: queries.balance2_coverage(layout, composition), "group"),
                "environments_covered": table(lambda: queries.steps_by_env(layout), "env_id"),
                "issues": Table([asdict(i) for i in self.issues], ["task_id", "stage", "reason"]),
                "path": layout.steps_dir.resolve(),
            },
            [f"task {issue.task_id}: {issue.reason}" for issue in self.issues],
        )


def _chunks(rows: Iterable[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    it = iter(rows)
    while chunk := list(islice(it, size)):
        yield chunk


def part_key(rows: list[dict[str, Any]], limits: Limits) -> str:
    """The content key of a part: what its labels depend on (:func:`~pipeline.labeling.rows.label_config`)
    and the fingerprints and initial states of its trajectories."""
    config = label_config(limits)
    h = hashlib.blake2b(digest_size=10)
    h.update(json.dumps([config["labeler"], config["limits"], config["code"]], sort_keys=True).encode())
    for row in rows:
        h.update(row["fingerprint"].encode())
        h.update(row["initial_state_hash"].encode())
    return h.hexdigest()


def _removable(layout: DataLayout, name: str) -> bool:
    """Whether a part outside this run's plan is stale for this run to remove."""
    if layout.partition is None:
        return True  # the unpartitioned run owns the whole steps table
    owner = step_part_partition(name)
    # None: an unpartitioned run's part (its trajectories table was dropped); else this partition's, or an orphan (no
    # trajectories of that partition)
    return owner in (None, layout.partition) or not layout.for_partition(owner).trajectories.exists()


def inflight_path(layout: DataLayout) -> Path:
    """Marker of the chunk being labeled now: if the process dies, it names what it was running."""
    return layout.steps_dir / f".inflight-{layout.partition or 'all'}.json"


def describe_inflight(layout: DataLayout) -> str:
    """The message for a labeling process that died mid-chunk (empty when none did)."""
    try:
        doc = json.loads(inflight_path(layout).read_text())
    except (OSError, ValueError):
        return ""
    envs = doc.get("environments", [])
    return (
        f"a previous labeling process died while labeling {len(doc.get('trajectories', []))} trajectories of "
        f"{', '.join(envs[:20])}{' …' if len(envs) > 20 else ''} (part {doc.get('part')}); that chunk is labeled again"
    )


def executed_at_labeling(layout: DataLayout) -> set[str]:
    """Trajectories the labeling stage executed itself (not labels kept from collection), from the
    current parts' sidecars (a sidecar written before they were listed counts as none)."""
    out: set[str] = set()
    for part in layout.step_parts():
        try:
            out.update(json.loads(Path(part).with_suffix(".issues.json").read_text()).get("executed", []))
        except (OSError, ValueError, AttributeError):
            continue
    return out


def _issue(traj: Trajectory | None, reason: str, origin: str = "") -> TaskIssue:
    """A labeling issue (its ``asdict`` is the sidecar's shape)."""
    task_id, trajectory_id = (traj.task_id, traj.trajectory_id) if traj is not None else ("", "")
    return TaskIssue(task_id, "label", reason, origin, trajectory_id)


@dataclass
class _Chunk:
    """A chunk of trajectories on its way to its part: the rows read, where it goes, the labels kept from
    collection, and the sandbox run of the others (the chunk running while the next is prepared)."""

    rows: list[dict[str, Any]]
    part: Path
    trajectories: list[Trajectory]
    kept: dict[str, list[dict[str, Any]]]
    running: Any = None

    @property
    def sidecar(self) -> Path:
        return self.part.with_suffix(".issues.json")


class _Labeling:
    """One labeling of a layout's trajectories, step by step (:func:`label`)."""

    def __init__(self, layout: DataLayout, sandbox: Sandbox, log: Log) -> None:
        self.layout, self.sandbox, self.log = layout, sandbox, log
        self.report = LabelReport()
        self.refs = CodeRefs()
        self.keep: set[str] = set()
        self.marker = inflight_path(layout)
        self.prelabels = Prelabels(layout.collected_steps, sandbox.limits)
        total = sum(pq.ParquetFile(f).metadata.num_rows for f in layout.trajectory_files())
        self.progress = Progress("labeling", total, log, unit="trajectories", detail=self._detail)

    def _detail(self) -> str:
        r = self.report
        return (
            f"{r.steps:,} steps; {r.prelabeled:,} trajectories' labels kept from collection, "
            f"{r.parts_reused} parts reused"
        )

    def note_died(self) -> None:
        """A marker left by a process that died mid-chunk: an issue naming the environments it had open."""
        if self.marker.exists():
            died = describe_inflight(self.layout)
            self.report.issues.append(_issue(None, died, str(self.marker)))
            self.log(died)

    def kept_issues(self, traj: Trajectory) -> list[TaskIssue]:
        return [_issue(traj, m) for m in self.prelabels.issues.get(traj.trajectory_id, [])]

    def reuse(self, rows: list[dict[str, Any]], part: Path) -> bool:
        """Count a part already written (its sidecar exists); False when it must be labeled."""
        sidecar = part.with_suffix(".issues.json")
        if not (part.exists() and sidecar.exists()):
            return False
        meta = json.loads(sidecar.read_text())
        self.report.parts_reused += 1
        self.report.steps += meta["steps"]
        self.report.issues.extend(TaskIssue(**i) for i in meta["issues"])
        self.progress.advance(len(rows))
        return True

    def prepare(self, rows: list[dict[str, Any]], part: Path) -> _Chunk | None:
        """The chunk's trajectories with the labels kept from collection; None when every one was kept (then
        its part is written at once, Arrow slices straight to the part)."""
        trajectories = [row_to_trajectory(r) for r in rows]
        kept_table, kept_ids = self.prelabels.table(rows)  # labels observed at collection: not executed again
        self.report.prelabeled += len(kept_ids)
        if len(kept_ids) == len(trajectories):
            issues = [i for t in trajectories for i in self.kept_issues(t)]
            self.write_part(_Chunk(rows, part, trajectories, {}), kept_table, issues, None, [])
            return None
        kept: dict[str, list[dict[str, Any]]] = {}
        for row in kept_table.to_pylist():
            kept.setdefault(row["trajectory_id"], []).append(row)
        return _Chunk(rows, part, trajectories, kept)

    def submit(self, chunk: _Chunk, pending: _Chunk | None) -> None:
        """Mark the environments open (named if this process dies mid-chunk), then run the chunk's trajectories
        whose labels were not kept in the sandbox."""
        open_envs = {t.env_id for c in (chunk, pending) if c is not None for t in c.trajectories}
        with atomic_path(self.marker) as tmp:
            tmp.write_text(
                json.dumps(
                    {
                        "part": chunk.part.name,
                        "environments": sorted(open_envs),
                        "trajectories": [t.trajectory_id for t in chunk.trajectories],
                    }
                )
            )
        chunk.running = self.sandbox.submit(t for t in chunk.trajectories if t.trajectory_id not in chunk.kept)

    def finish(self, chunk: _Chunk) -> None:
        """The chunk's rows (kept, then executed, in trajectory order) and issues, written as its part."""
        expected = {r["trajectory_id"]: r["initial_state_hash"] for r in chunk.rows}
        rows: list[dict[str, Any]] = []
        issues: list[TaskIssue] = []
        timing = {"calls": 0, "seconds": 0.0, "max_seconds": 0.0}  # wall clock: not a label, kept out of the part
        executed = chunk.running
        for traj in chunk.trajectories:
            if traj.trajectory_id in chunk.kept:
                rows.extend(chunk.kept[traj.trajectory_id])
                issues.extend(self.kept_issues(traj))
                continue
            _, result = next(executed)
            problem = _reset_problem(result, expected[traj.trajectory_id])
            if problem:
                issues.append(_issue(traj, problem))
                continue
            issues.extend(_issue(traj, m) for m in trajectory_issues(result))
            for step in result["steps"]:
                rows.append(step_row(traj, step, self.refs.ref(traj, step["tool"])))
                _time(timing, step.get("call_seconds"))
        executed_ids = [t.trajectory_id for t in chunk.trajectories if t.trajectory_id not in chunk.kept]
        self.write_part(chunk, rows, issues, timing, executed_ids)

    def write_part(
        self,
        chunk: _Chunk,
        steps: pa.Table | list[dict[str, Any]],
        issues: list[TaskIssue],
        timing: dict[str, Any] | None,
        executed: list[str],
    ) -> None:
        """The one way a part is written: its issues logged, the part, then its sidecar (the part is
        complete when the sidecar exists), the report counted."""
        for issue in issues:
            self.log(f"trajectory {issue.trajectory_id} (task {issue.task_id}): {issue.reason}")
        count = (write_arrow if isinstance(steps, pa.Table) else write_table)(chunk.part, steps, schema.STEPS)
        with atomic_path(chunk.sidecar) as tmp:
            sidecar = {"steps": count, "issues": [asdict(i) for i in issues], "timing": timing, "executed": executed}
            tmp.write_text(json.dumps(sidecar))
        self.report.parts_written += 1
        self.report.steps += count
        self.report.issues.extend(issues)
        self.progress.advance(len(chunk.rows))

    def remove_stale(self) -> None:
        """Parts of this layout no chunk of this labeling named (a partition's own only)."""
        for stale in self.layout.steps_dir.glob("part-*"):
            if stale.name not in self.keep and _removable(self.layout, stale.name):
                stale.unlink(missing_ok=True)
                self.report.stale_parts_removed += 1


def _reset_problem(result: dict[str, Any], expected_hash: str) -> str | None:
    """Why a trajectory is not labeled: its reset failed, or gave another initial state than at collection."""
    if result["init"] is None:
        return f"reset failed: {result['init_error']}"
    if result["init"]["state_hash"] != expected_hash:
        return (
            "initial state differs from the one recorded at collection "
            "(non-deterministic reset); trajectory not labeled"
        )
    return None


def _time(timing: dict[str, Any], seconds: Any) -> None:
    if isinstance(seconds, (int, float)):
        timing["calls"] += 1
        timing["seconds"] += seconds
        timing["max_seconds"] = max(timing["max_seconds"], seconds)


def label(layout: DataLayout, sandbox: Sandbox, chunk_size: int = 100, log: Log = lambda _m: None) -> LabelReport:
    """Label all trajectories of ``layout`` into ``steps/part-*.parquet`` (a partition-scoped layout: the partition's
    trajectories into ``steps/part-<partition>-*.parquet``): each chunk of trajectories is reused, written from the
    labels kept at collection, or run in the sandbox while the chunk before it is written."""
    started = time.perf_counter()
    load_blobs(layout)
    layout.steps_dir.mkdir(parents=True, exist_ok=True)
    run = _Labeling(layout, sandbox, log)
    run.note_died()
    pending: _Chunk | None = None
    for rows in _chunks(iter_trajectory_rows(layout), chunk_size):
        part = layout.step_part(part_key(rows, sandbox.limits))
        run.keep.update({part.name, part.with_suffix(".issues.json").name})
        run.report.trajectories += len(rows)
        if run.reuse(rows, part):
            continue
        chunk = run.prepare(rows, part)
        if chunk is None:
            continue
        run.submit(chunk, pending)
        if pending is not None:  # written while this chunk already runs in the sandbox
            run.finish(pending)
        pending = chunk
    if pending is not None:
        run.finish(pending)
    run.progress.finish()
    run.marker.unlink(missing_ok=True)
    run.remove_stale()
    run.report.seconds = time.perf_counter() - started
    return run.report
