"""The Δ round-trip verification of the labeled steps, for the whole table or one partition."""

from __future__ import annotations

from typing import Any

import pyarrow.parquet as pq

from pipeline.store.layout import DataLayout
from pipeline.store.reconstruct import VerifyReport, verify_steps, verify_trajectory
from pipeline.store.trajectories import iter_trajectory_rows

_COLUMNS = ["trajectory_id", "step_index", "delta", "delta_size", "state_before_hash", "state_after_hash"]


def verify_labeled(layout: DataLayout, max_problems: int = 50) -> VerifyReport:
    """``reconstruct.verify_steps`` for an unpartitioned layout; for a partition-scoped one the same
    check over that partition's parts and trajectories only (other partitions may be re-collected or
    re-labeled by their own runs at the same time, and need not be verified again per partition)."""
    if layout.partition is None:
        return verify_steps(layout, max_problems)
    report = VerifyReport()
    for part in layout.step_parts():
        by_traj: dict[str, list[dict[str, Any]]] = {}
        for row in pq.read_table(part, columns=_COLUMNS).to_pylist():
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
        if len(report.problems) >= max_problems:
            break
    return report
