"""Step rows of the steps table, and the labels kept from collection (each call executed once).

The sandbox labels every call it runs (labels are computed outside it, :mod:`pipeline.execution.labels`). Collection
already runs every trajectory — exploration episodes live, ground-truth and agent trajectories in full — so it keeps
those labels (:class:`CollectedSteps`, written next to the trajectories table) and the labeling stage re-executes only
trajectories without them (collected with other limits, code versions or labeler version, or recorded elsewhere). The
determinism check re-executes at least one trajectory of every environment — kept labels included — in fresh children
and compares its labels with these (:mod:`pipeline.labeling.determinism`).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.core.trajectory import Trajectory
from pipeline.envs import blobs, registry
from pipeline.execution.child import Limits
from pipeline.store import schema
from pipeline.store.parquet_io import RowWriter, atomic_path

LABELER_VERSION = "3"  # 2: labels computed outside the sandbox; call timings in the sidecar; 3: the outcome_rule column

#: the collected-steps file: a step row plus the fingerprint of the trajectory it was labeled from
COLLECTED = pa.schema(list(schema.STEPS) + [pa.field("trajectory_fingerprint", pa.string(), nullable=False)])


class CodeRefs:
    """Memoised ``code(a_t)`` references, computed from a static (never reset) environment."""

    def __init__(self) -> None:
        self._refs: dict[tuple[str, str, str], str | None] = {}
        self._envs: dict[tuple[str, str], Any] = {}

    def ref(self, traj: Trajectory, tool: str) -> str | None:
        spec = (traj.source, json.dumps(traj.env.options, sort_keys=True))
        key = (*spec, tool)
        if key not in self._refs:
            try:
                if spec not in self._envs:
                    self._envs[spec] = registry.build_without_reset(traj.env)
                env = self._envs[spec]
                self._refs[key] = blobs.ref_of(env.source_of(tool)) if env.has_tool(tool) else None
            except Exception:
                self._refs[key] = None
        return self._refs[key]


def step_row(traj: Trajectory, step: dict[str, Any], ref: str | None) -> dict[str, Any]:
    row = {k: step[k] for k in schema.STEPS.names if k in step}
    row.update(
        step_id=f"{traj.trajectory_id}#{step['step_index']}",
        trajectory_id=traj.trajectory_id,
        source=registry.source_of(traj.env),
        adapter=traj.env.source,
        env_id=traj.env_id,
        task_id=traj.task_id,
        code_ref=ref,
    )
    return row


def trajectory_issues(result: dict[str, Any]) -> list[str]:
    """The labeling issues of one sandbox result (besides a failed reset)."""
    out = [str(m) for m in result["issues"]]
    for step in result["steps"]:
        if step["outcome"] == "error" and step["error_type"] in ("Timeout", "WorkerCrash"):
            out.append(f"step {step['step_index']} ({step['tool']}): {step['error_message']}")
    return out


def label_config(limits: Limits) -> dict[str, Any]:
    """What labels depend on besides the trajectory: labeler version, limits, environment code versions (and the
    step row's columns: collected rows of another schema are not reused)."""
    return {
        "labeler": LABELER_VERSION,
        "limits": asdict(limits),
        "code": registry.code_versions(),
        "columns": list(COLLECTED.names),
    }


class CollectedSteps:
    """Writer of the labels observed at collection (``layout.collected_steps``)."""

    def __init__(self, path: Path, limits: Limits) -> None:
        self.path = path
        self.config = label_config(limits)
        self.refs = CodeRefs()
        self.issues: dict[str, list[str]] = {}
        self._writer = RowWriter(path, COLLECTED)

    def add(self, traj: Trajectory, result: dict[str, Any]) -> None:
        fingerprint = traj.fingerprint()
        for step in result["steps"]:
            self._writer.add(
                {**step_row(traj, step, self.refs.ref(traj, step["tool"])), "trajectory_fingerprint": fingerprint}
            )
        problems = trajectory_issues(result)
        if problems:
            self.issues[traj.trajectory_id] = problems

    def __enter__(self) -> CollectedSteps:
        self._writer.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._writer.__exit__(*exc)
        if exc[0] is None:
            with atomic_path(sidecar(self.path)) as tmp:
                tmp.write_text(json.dumps({"config": self.config, "issues": self.issues}, sort_keys=True))


def sidecar(path: Path) -> Path:
    return path.with_suffix(".json")


class Prelabels:
    """Reader: the collected labels of trajectories, when they were labeled under this run's config.

    Collection writes them in the order of the trajectories table, which is the order the labeling
    stage walks it, so they are read as one sequential stream of Arrow batches (a chunk whose
    trajectories are all covered is written as Arrow slices, never as Python rows)."""

    def __init__(self, path: Path, limits: Limits) -> None:
        self.usable = False
        self.issues: dict[str, list[str]] = {}
        try:
            meta = json.loads(sidecar(path).read_text())
        except (OSError, ValueError):
            return
        if not path.exists() or meta.get("config") != json.loads(json.dumps(label_config(limits))):
            return
        self.usable = True
        self.issues = meta.get("issues", {})
        self._batches = pq.ParquetFile(str(path)).iter_batches(batch_size=8192)
        self._pending = pa.Table.from_batches([], schema=COLLECTED)

    def _next_rows(self, wanted: set[str]) -> pa.Table:
        """The rows at the head of the stream that belong to ``wanted`` trajectories."""
        taken = []
        while True:
            if self._pending.num_rows == 0:
                batch = next(self._batches, None)
                if batch is None:
                    break
                self._pending = pa.Table.from_batches([batch])
            inside = pc.is_in(self._pending.column("trajectory_id"), value_set=pa.array(sorted(wanted)))
            outside = pc.indices_nonzero(pc.invert(inside))
            cut = outside[0].as_py() if len(outside) else self._pending.num_rows
            taken.append(self._pending.slice(0, cut))
            self._pending = self._pending.slice(cut)
            if self._pending.num_rows:
                break
        return pa.concat_tables(taken) if taken else self._pending.slice(0, 0)

    def table(self, trajectories: list[dict[str, Any]]) -> tuple[pa.Table, set[str]]:
        """(step rows without the fingerprint, ids of the covered trajectories) for a chunk of
        trajectory-table rows; a trajectory is covered when its collected fingerprint matches."""
        if not self.usable:
            return pa.Table.from_batches([], schema=schema.STEPS), set()
        wanted = {r["trajectory_id"]: r["fingerprint"] for r in trajectories}
        rows = self._next_rows(set(wanted))
        pairs = rows.group_by(["trajectory_id", "trajectory_fingerprint"]).aggregate([]).to_pylist()
        covered = {p["trajectory_id"] for p in pairs if wanted.get(p["trajectory_id"]) == p["trajectory_fingerprint"]}
        if len(covered) < len(pairs):  # a stale row among them: keep only the matching ones
            rows = rows.filter(pc.is_in(rows.column("trajectory_id"), value_set=pa.array(sorted(covered))))
        return rows.drop_columns(["trajectory_fingerprint"]).cast(schema.STEPS), covered
