"""Collection stage: turn a task source into the trajectories table (+ an issues table).

Every trajectory runs once inside the sandbox: its initial state is recorded with it (a reset that
raises, hangs or crashes becomes an issue naming the task, never a crash) and the labels of its calls
are kept (``layout.collected_steps``), so the labeling stage executes only what collection did not.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pipeline.core.canonical import canonical_json, canonicalize
from pipeline.core.issues import TaskIssue
from pipeline.core.progress import Log, Progress
from pipeline.core.trajectory import Trajectory
from pipeline.envs import registry
from pipeline.execution.sandbox import Sandbox
from pipeline.labeling.rows import CollectedSteps
from pipeline.store import schema
from pipeline.store.layout import DataLayout
from pipeline.store.parquet_io import write_table
from pipeline.store.partitions import end_unpartitioned
from pipeline.store.trajectories import trajectory_row


@dataclass
class CollectReport:
    trajectories: int = 0
    actions: int = 0
    issues: list[TaskIssue] = field(default_factory=list)
    by_category: Counter[str] = field(default_factory=Counter)
    by_env: Counter[str] = field(default_factory=Counter)
    by_strategy: Counter[str] = field(default_factory=Counter)


def _json_actions(traj: Trajectory) -> Trajectory:
    """Normalise action arguments to the JSON values that are stored (and later re-executed)."""
    actions = tuple(
        dataclasses.replace(a, arguments=json.loads(canonical_json(canonicalize(a.arguments)))) for a in traj.actions
    )
    return dataclasses.replace(traj, actions=actions)


Probed = tuple  # (Trajectory, sandbox result with "init") from exploration


def collect(
    items: Iterable[Trajectory | TaskIssue | Probed],
    layout: DataLayout,
    sandbox: Sandbox,
    log: Log = lambda _m: None,
    probe_chunk: int = 256,
    progress: Mapping[str, Progress] | None = None,
    observe: Callable[[dict[str, Any]], None] | None = None,
) -> CollectReport:
    """Write ``trajectories.parquet`` and ``issues.parquet`` atomically (a partition's: ``part-<partition>.parquet``
    and ``issues-<partition>.parquet``; unpartitioned, an earlier partitioned collection's files are removed).

    Trajectories without their initial state (replays) are run in the sandbox to record it; explored ones arrive
    with it. ``progress`` (by strategy) counts each replay the sandbox ran; ``observe`` is given their steps."""
    report = CollectReport()

    kept = CollectedSteps(layout.collected_steps, sandbox.limits)

    def accept(traj: Trajectory, init: dict[str, Any], result: dict[str, Any] | None = None) -> dict[str, Any]:
        if result is not None and len(result["steps"]) == len(traj.actions):
            kept.add(traj, result)  # labeled now; labeling does not execute these calls again
        report.trajectories += 1
        report.actions += len(traj.actions)
        report.by_category[traj.category] += 1
        report.by_env[traj.env_id] += 1
        report.by_strategy[traj.strategy] += 1
        return trajectory_row(traj, init["state_json"], init["state_hash"], registry.source_of(traj.env))

    def probe(pending: list[Trajectory]) -> Iterable[dict[str, Any]]:
        for strategy in {t.strategy for t in pending} & set(progress or {}):
            progress[strategy].begin()  # its rate counts from its first trajectory's run
        runs = sandbox.run(pending)  # in input order; executed in full, so the labels are kept
        for original, (_run, result) in zip(pending, runs):
            if progress and original.strategy in progress:
                progress[original.strategy].advance()
            if result["init"] is None:
                issue = TaskIssue(original.task_id, "reset", result["init_error"] or "reset failed", "")
                report.issues.append(issue)
                log(f"skipped task {issue.task_id} (reset): {issue.reason}")
                continue
            if observe is not None:
                for step in result["steps"]:
                    observe(step)
            yield accept(original, result["init"], result)

    def rows() -> Iterable[dict[str, Any]]:
        pending: list[Trajectory] = []
        for item in items:
            if isinstance(item, TaskIssue):
                report.issues.append(item)
                log(f"skipped task {item.task_id} ({item.stage}): {item.reason}")
            elif isinstance(item, tuple):
                traj, result = item
                yield accept(_json_actions(traj), result["init"], result)
            else:
                pending.append(_json_actions(item))
                if len(pending) >= probe_chunk:
                    yield from probe(pending)
                    pending = []
        yield from probe(pending)

    with kept:
        write_table(layout.trajectories, rows(), schema.TRAJECTORIES, batch_rows=128)
    for phase in (progress or {}).values():
        phase.finish()  # a phase that ended short of its total (a trajectory not run) still gets its last line
    write_table(layout.collection_issues, map(dataclasses.asdict, report.issues), schema.ISSUES)
    if layout.partition is None:
        for name in end_unpartitioned(layout):
            log(f"removed {name} (a partitioned collection's file; this collection is unpartitioned)")
    return report
