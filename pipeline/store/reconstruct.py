"""Rebuild full states from initial state + Δs, and verify them against the recorded hashes."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

import pyarrow.parquet as pq

from pipeline.core.canonical import state_hash
from pipeline.core.delta import DeltaError, apply
from pipeline.store.layout import DataLayout
from pipeline.store.trajectories import iter_trajectory_rows


def decode_delta(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Stored Δ (JSON-text values) -> Δ records with decoded values."""
    return [
        {
            "op": r["op"],
            "path": list(r["path"]),
            "before": None if r["before"] is None else json.loads(r["before"]),
            "after": None if r["after"] is None else json.loads(r["after"]),
        }
        for r in records
    ]


def replay_states(initial_state: Any, steps: Iterable[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], Any, Any]]:
    """Yield ``(step, s_t, s'_t)`` for the steps of one trajectory in step order."""
    state = initial_state
    for step in steps:
        after = apply(decode_delta(step["delta"]), state)
        yield step, state, after
        state = after


@dataclass
class VerifyReport:
    trajectories: int = 0
    steps: int = 0
    problems: list[str] = field(default_factory=list)
    failed_trajectories: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def verify_trajectory(trajectory_id: str, initial_json: str, initial_hash: str, steps: list[dict[str, Any]], report: VerifyReport) -> None:
    before = len(report.problems)
    _verify_trajectory(trajectory_id, initial_json, initial_hash, steps, report)
    if len(report.problems) > before:
        report.failed_trajectories.append(trajectory_id)


def _verify_trajectory(trajectory_id: str, initial_json: str, initial_hash: str, steps: list[dict[str, Any]], report: VerifyReport) -> None:
    initial = json.loads(initial_json)
    if state_hash(initial) != initial_hash:
        report.problems.append(f"{trajectory_id}: stored initial state does not match its hash")
        return
    state, current = initial, initial_hash
    for step in sorted(steps, key=lambda s: s["step_index"]):
        sid = f"{trajectory_id}#{step['step_index']}"
        report.steps += 1
        if step["state_before_hash"] != current:
            report.problems.append(f"{sid}: s_t hash {step['state_before_hash']} != reconstructed {current}")
            return
        try:
            state = apply(decode_delta(step["delta"]), state)
        except DeltaError as exc:
            report.problems.append(f"{sid}: Δ does not apply: {exc}")
            return
        current = state_hash(state)
        if current != step["state_after_hash"]:
            report.problems.append(f"{sid}: s_t + Δ hashes to {current}, recorded s'_t is {step['state_after_hash']}")
            return
        if step["delta_size"] != len(step["delta"]):
            report.problems.append(f"{sid}: |Δ| = {step['delta_size']} but Δ has {len(step['delta'])} records")


def verify_steps(layout: DataLayout, max_problems: int = 50) -> VerifyReport:
    """Check every step: Δ applied to the reconstructed s_t reproduces the recorded s'_t hash."""
    report = VerifyReport()
    columns = ["trajectory_id", "step_index", "delta", "delta_size", "state_before_hash", "state_after_hash"]
    for part in layout.step_parts():  # a partition-scoped layout: that partition's parts only
        by_traj: dict[str, list[dict[str, Any]]] = {}
        for row in pq.read_table(part, columns=columns).to_pylist():
            by_traj.setdefault(row["trajectory_id"], []).append(row)
        if not by_traj:
            continue
        for traj in iter_trajectory_rows(
            layout, columns=["trajectory_id", "initial_state_json", "initial_state_hash"], ids=list(by_traj)
        ):
            report.trajectories += 1
            verify_trajectory(
                traj["trajectory_id"], traj["initial_state_json"], traj["initial_state_hash"],
                by_traj.pop(traj["trajectory_id"]), report,
            )
        for orphan in by_traj:
            report.problems.append(f"{orphan}: steps without a trajectory row")
            report.failed_trajectories.append(orphan)
        if len(report.problems) >= max_problems:
            break
    return report


def materialize_states(layout: DataLayout, trajectory_id: str) -> list[tuple[dict[str, Any], Any, Any]]:
    """Full ``(step, s_t, s'_t)`` for one trajectory, verified against the recorded hashes."""
    rows = list(iter_trajectory_rows(layout, ids=[trajectory_id]))
    if not rows:
        raise KeyError(f"unknown trajectory {trajectory_id!r}")
    import pyarrow.dataset as ds

    steps = (
        ds.dataset(layout.step_parts(), format="parquet")
        .to_table(filter=ds.field("trajectory_id") == trajectory_id)
        .sort_by("step_index")
        .to_pylist()
    )
    out = []
    for step, before, after in replay_states(json.loads(rows[0]["initial_state_json"]), steps):
        if state_hash(before) != step["state_before_hash"] or state_hash(after) != step["state_after_hash"]:
            raise ValueError(f"{step['step_id']}: reconstructed state does not match its recorded hash")
        out.append((step, before, after))
    return out
