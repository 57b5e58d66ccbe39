"""Determinism check: re-execute a seeded sample of trajectories from scratch and compare labels."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import pyarrow.dataset as ds

from pipeline.envs.catalog import load_blobs
from pipeline.execution.sandbox import Sandbox
from pipeline.store.layout import DataLayout
from pipeline.store.trajectories import iter_trajectories, iter_trajectory_rows

#: every label column except timing
LABEL_FIELDS = (
    "tool", "arguments_json", "args_count", "raw_observation", "observation_json", "outcome",
    "error_type", "error_message", "delta", "delta_size", "state_before_hash", "state_after_hash",
)


@dataclass
class DeterminismReport:
    sampled: list[str] = field(default_factory=list)
    steps_compared: int = 0
    mismatches: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.mismatches


def _normalise(value: Any) -> Any:
    if isinstance(value, list):
        return [_normalise(v) for v in value]
    if isinstance(value, dict):
        return {k: _normalise(v) for k, v in value.items()}
    return value


def check_determinism(layout: DataLayout, sandbox: Sandbox, sample_size: int = 20, seed: int = 0) -> DeterminismReport:
    load_blobs(layout)
    ids = sorted(r["trajectory_id"] for r in iter_trajectory_rows(layout, columns=["trajectory_id"]))
    report = DeterminismReport(sampled=random.Random(seed).sample(ids, min(sample_size, len(ids))))
    if not report.sampled:
        return report
    stored: dict[tuple[str, int], dict[str, Any]] = {}
    dataset = ds.dataset(layout.step_parts(), format="parquet")
    table = dataset.to_table(filter=ds.field("trajectory_id").isin(report.sampled))
    for row in table.to_pylist():
        stored[(row["trajectory_id"], row["step_index"])] = row
    for traj, result in sandbox.run(iter_trajectories(layout, ids=report.sampled)):
        if result["init"] is None:
            report.mismatches.append(f"{traj.trajectory_id}: reset failed on re-execution: {result['init_error']}")
            continue
        fresh = {s["step_index"]: s for s in result["steps"]}
        old = {i for (t, i) in stored if t == traj.trajectory_id}
        if set(fresh) != old:
            report.mismatches.append(f"{traj.trajectory_id}: {len(fresh)} steps re-executed, {len(old)} stored")
        for index in sorted(set(fresh) & old):
            report.steps_compared += 1
            a, b = fresh[index], stored[(traj.trajectory_id, index)]
            diffs = [f for f in LABEL_FIELDS if _normalise(a[f]) != _normalise(b[f])]
            if diffs:
                report.mismatches.append(f"{traj.trajectory_id}#{index}: {', '.join(diffs)} differ on re-execution")
    return report
