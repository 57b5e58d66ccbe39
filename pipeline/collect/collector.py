"""Collection stage: turn a task source into the trajectories table (+ an issues table).

Every trajectory's environment is reset once inside the sandbox to record its initial state
(a reset that raises, hangs or crashes becomes an issue naming the task, never a crash).
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from pipeline.collect.trajectory import Action, Trajectory
from pipeline.envs.bfcl_tasks import TaskIssue
from pipeline.execution.sandbox import Sandbox
from pipeline.state.canonical import canonical_json, canonicalize
from pipeline.store import schema
from pipeline.store.layout import DataLayout
from pipeline.store.parquet_io import write_table
from pipeline.store.trajectories import trajectory_row

Log = Callable[[str], None]


@dataclass
class CollectReport:
    trajectories: int = 0
    actions: int = 0
    issues: list[TaskIssue] = field(default_factory=list)
    by_category: Counter[str] = field(default_factory=Counter)
    by_env: Counter[str] = field(default_factory=Counter)

    def issue_rows(self) -> list[dict[str, Any]]:
        return [
            {"stage": i.stage, "task_id": i.task_id, "trajectory_id": None, "reason": i.reason, "origin": i.origin}
            for i in self.issues
        ]


def _json_actions(traj: Trajectory) -> Trajectory:
    """Normalise action arguments to the JSON values that are stored (and later re-executed)."""
    actions = tuple(
        dataclasses.replace(a, arguments=json.loads(canonical_json(canonicalize(a.arguments))))
        for a in traj.actions
    )
    return dataclasses.replace(traj, actions=actions)


def collect(
    items: Iterable[Trajectory | TaskIssue],
    layout: DataLayout,
    sandbox: Sandbox,
    log: Log = lambda _m: None,
) -> CollectReport:
    """Record initial states and write ``trajectories.parquet`` and ``issues.parquet`` atomically."""
    report = CollectReport()
    valid: list[Trajectory] = []
    for item in items:
        if isinstance(item, TaskIssue):
            report.issues.append(item)
            log(f"skipped task {item.task_id} ({item.stage}): {item.reason}")
        else:
            valid.append(_json_actions(item))

    def rows() -> Iterable[dict[str, Any]]:
        resets = sandbox.run(dataclasses.replace(t, actions=()) for t in valid)  # in input order
        for original, (_probe, result) in zip(valid, resets):
            init = result["init"]
            if init is None:
                issue = TaskIssue(original.task_id, "reset", result["init_error"] or "reset failed", "")
                report.issues.append(issue)
                log(f"skipped task {issue.task_id} (reset): {issue.reason}")
                continue
            report.trajectories += 1
            report.actions += len(original.actions)
            report.by_category[original.category] += 1
            report.by_env[original.env_id] += 1
            yield trajectory_row(original, init["state_json"], init["state_hash"])

    write_table(layout.trajectories, rows(), schema.TRAJECTORIES, batch_rows=128)
    write_table(layout.collection_issues, report.issue_rows(), schema.ISSUES)
    return report
