"""Labeling stage: write the steps table, one labeled row per call of every collected trajectory. A
trajectory collection already labeled under this run's configuration keeps those labels (``Prelabels``);
the others are executed again in the sandbox and labeled from that execution.

The steps table is written as resumable parts: trajectories are taken in table order in chunks,
each chunk's part file is named by a content key (labeler version, limits, source code versions,
trajectory fingerprints). A part that exists is reused, so re-running is idempotent and an
interrupted run resumes where it stopped; parts from older inputs are removed only after a run
completes. A part's sidecar (``.issues.json``) keeps its issues, call timings and the trajectories
the stage *executed* (``executed``; the others' labels were kept from collection), which tells the
determinism check which labels come from a second execution (:func:`executed_at_labeling`).

Partitioned (``ENVSIM_SHARDS``; a partition-scoped ``DataLayout``): only the partition's
trajectories are labeled, into ``steps/part-<partition>-<key>.parquet``, and the clean-up touches
only that partition's parts — plus parts no current trajectory file can own (an unpartitioned run's,
a partition whose trajectories are gone after a change of ``ENVSIM_SHARDS``). Other partitions'
parts, which their own runs may be writing right now, are never removed.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.core.progress import Log, Progress
from pipeline.core.trajectory import Trajectory
from pipeline.envs.catalog import load_blobs
from pipeline.execution.child import Limits
from pipeline.execution.sandbox import Sandbox
from pipeline.labeling.rows import CodeRefs, Prelabels, label_config, step_row, trajectory_issues
from pipeline.store import schema
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
    issues: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def steps_per_second(self) -> float:
        return self.steps / self.seconds if self.seconds else 0.0


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
    if owner is None:
        return True  # an unpartitioned run's part: its trajectories table was dropped
    if owner == layout.partition:
        return True
    return not layout.for_partition(owner).trajectories.exists()  # orphan: no trajectories of that partition


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


def label(
    layout: DataLayout,
    sandbox: Sandbox,
    chunk_size: int = 100,
    log: Log = lambda _m: None,
) -> LabelReport:
    """Label all trajectories of ``layout`` into ``steps/part-*.parquet`` (a partition-scoped
    layout: the partition's trajectories into ``steps/part-<partition>-*.parquet``)."""
    report = LabelReport()
    started = time.perf_counter()
    load_blobs(layout)
    layout.steps_dir.mkdir(parents=True, exist_ok=True)
    refs = CodeRefs()
    keep: set[str] = set()
    marker = inflight_path(layout)
    prelabels = Prelabels(layout.collected_steps, sandbox.limits)
    if marker.exists():
        died = describe_inflight(layout)
        report.issues.append(
            {"stage": "label", "task_id": "", "trajectory_id": "", "origin": str(marker), "reason": died}
        )
        log(died)
    pending: tuple[Any, ...] | None = None  # the chunk running in the sandbox while the next is prepared
    total = sum(pq.ParquetFile(f).metadata.num_rows for f in layout.trajectory_files())
    progress = Progress(
        "labeling",
        total,
        log,
        unit="trajectories",
        detail=lambda: (
            f"{report.steps:,} steps; {report.prelabeled:,} trajectories' labels kept from collection, "
            f"{report.parts_reused} parts reused"
        ),
    )

    def kept_issues(traj: Trajectory) -> list[dict[str, Any]]:
        return [
            {"stage": "label", "task_id": traj.task_id, "trajectory_id": traj.trajectory_id, "origin": "", "reason": m}
            for m in prelabels.issues.get(traj.trajectory_id, [])
        ]

    def write_part(
        chunk: list[dict[str, Any]],
        part: Path,
        sidecar: Path,
        steps: pa.Table | list[dict[str, Any]],
        issues: list[dict[str, Any]],
        timing: dict[str, Any] | None,
        executed: list[str],
    ) -> None:
        """The one way a part is written: its issues logged, the part, then its sidecar (the part is
        complete when the sidecar exists), the report counted."""
        for issue in issues:
            log(f"trajectory {issue['trajectory_id']} (task {issue['task_id']}): {issue['reason']}")
        if isinstance(steps, pa.Table):
            write_arrow(part, steps, schema.STEPS)
        else:
            write_table(part, steps, schema.STEPS)
        count = len(steps)
        with atomic_path(sidecar) as tmp:
            tmp.write_text(json.dumps({"steps": count, "issues": issues, "timing": timing, "executed": executed}))
        report.parts_written += 1
        report.steps += count
        report.issues.extend(issues)
        progress.advance(len(chunk))

    def finish(
        chunk: list[dict[str, Any]],
        part: Path,
        sidecar: Path,
        trajectories: list[Trajectory],
        kept: dict[str, list[dict[str, Any]]],
        running: Any,
    ) -> None:
        expected = {r["trajectory_id"]: r["initial_state_hash"] for r in chunk}
        rows: list[dict[str, Any]] = []
        issues: list[dict[str, Any]] = []
        timing = {"calls": 0, "seconds": 0.0, "max_seconds": 0.0}  # wall clock: not a label, kept out of the part
        executed = running.results()
        for traj in trajectories:
            where = {"stage": "label", "task_id": traj.task_id, "trajectory_id": traj.trajectory_id, "origin": ""}
            if traj.trajectory_id in kept:
                rows.extend(kept[traj.trajectory_id])
                issues.extend(kept_issues(traj))
                continue
            _, result = next(executed)
            if result["init"] is None:
                issues.append({**where, "reason": f"reset failed: {result['init_error']}"})
                continue
            if result["init"]["state_hash"] != expected[traj.trajectory_id]:
                issues.append(
                    {
                        **where,
                        "reason": "initial state differs from the one recorded at collection (non-deterministic "
                        "reset); trajectory not labeled",
                    }
                )
                continue
            issues.extend({**where, "reason": m} for m in trajectory_issues(result))
            for step in result["steps"]:
                rows.append(step_row(traj, step, refs.ref(traj, step["tool"])))
                seconds = step.get("call_seconds")
                if isinstance(seconds, (int, float)):
                    timing["calls"] += 1
                    timing["seconds"] += seconds
                    timing["max_seconds"] = max(timing["max_seconds"], seconds)
        write_part(
            chunk,
            part,
            sidecar,
            rows,
            issues,
            timing,
            [t.trajectory_id for t in trajectories if t.trajectory_id not in kept],
        )

    for chunk in _chunks(iter_trajectory_rows(layout), chunk_size):
        key = part_key(chunk, sandbox.limits)
        part = layout.step_part(key)
        sidecar = part.with_suffix(".issues.json")
        keep.update({part.name, sidecar.name})
        report.trajectories += len(chunk)
        if part.exists() and sidecar.exists():
            meta = json.loads(sidecar.read_text())
            report.parts_reused += 1
            report.steps += meta["steps"]
            report.issues.extend(meta["issues"])
            progress.advance(len(chunk))
            continue
        trajectories = [row_to_trajectory(r) for r in chunk]
        kept_table, kept_ids = prelabels.table(chunk)  # labels observed at collection: not executed again
        report.prelabeled += len(kept_ids)
        if len(kept_ids) == len(trajectories):  # the whole chunk: Arrow slices straight to the part
            write_part(chunk, part, sidecar, kept_table, [i for t in trajectories for i in kept_issues(t)], None, [])
            continue
        kept: dict[str, list[dict[str, Any]]] = {}
        for row in kept_table.to_pylist():
            kept.setdefault(row["trajectory_id"], []).append(row)
        open_envs = {t.env_id for t in trajectories} | (set(pending[-1]) if pending else set())
        with atomic_path(marker) as tmp:  # names the environments if this process dies mid-chunk
            tmp.write_text(
                json.dumps(
                    {
                        "part": part.name,
                        "environments": sorted(open_envs),
                        "trajectories": [t.trajectory_id for t in trajectories],
                    }
                )
            )
        running = sandbox.submit(t for t in trajectories if t.trajectory_id not in kept)
        if pending is not None:  # written while this chunk already runs in the sandbox
            finish(*pending[:-1])
        pending = (chunk, part, sidecar, trajectories, kept, running, sorted({t.env_id for t in trajectories}))
    if pending is not None:
        finish(*pending[:-1])
    progress.finish()
    marker.unlink(missing_ok=True)
    for stale in layout.steps_dir.glob("part-*"):
        if stale.name not in keep and _removable(layout, stale.name):
            stale.unlink(missing_ok=True)
            report.stale_parts_removed += 1
    report.seconds = time.perf_counter() - started
    return report
