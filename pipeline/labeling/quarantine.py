"""Quarantine of environments whose stored labels do not verify (the ``delta_roundtrip`` check).

One environment's bad labels must not block every other: when a step's Δ does not reproduce its
recorded s'_t hash, every step of that *environment* is written to
``determinism/quarantine-<scope>.parquet`` (step id + reason, the same findings format as the
determinism check), stratification excludes them with that reason, and the run summary names the
environments. The other environments reach the splits.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.labeling.determinism import NONDETERMINISTIC
from pipeline.store.duck import connect
from pipeline.store.layout import DataLayout
from pipeline.store.parquet_io import atomic_path, write_table
from pipeline.store.reconstruct import VerifyReport


@dataclass
class QuarantineReport:
    environments: list[str] = field(default_factory=list)
    steps: int = 0
    path: Path | None = None


def quarantine_path(layout: DataLayout) -> Path:
    return layout.determinism_findings("quarantine")


def quarantine(layout: DataLayout, report: VerifyReport) -> QuarantineReport:
    """Write (or clear) the quarantine findings for the environments of the failed trajectories."""
    out = QuarantineReport(path=quarantine_path(layout))
    parts = layout.step_parts()
    rows: list[dict] = []
    if report.failed_trajectories and parts:
        con = connect()
        failing = sorted(set(report.failed_trajectories))
        envs = [r[0] for r in con.execute(
            "SELECT DISTINCT env_id FROM read_parquet(?) WHERE trajectory_id IN (SELECT unnest(?)) ORDER BY 1",
            [parts, failing]).fetchall()]
        first = {}
        for problem in report.problems:
            first.setdefault(problem.split("#")[0].split(":")[0], problem)
        reasons = {}
        for env, traj in con.execute(
            "SELECT env_id, min(trajectory_id) FROM read_parquet(?) WHERE trajectory_id IN (SELECT unnest(?)) GROUP BY 1",
            [parts, failing]).fetchall():
            reasons[env] = f"quarantined: delta_roundtrip failed in this environment ({first.get(traj, traj)[:300]})"
        for step_id, traj, env, index in con.execute(
            "SELECT step_id, trajectory_id, env_id, step_index FROM read_parquet(?) WHERE env_id IN (SELECT unnest(?)) ORDER BY step_id",
            [parts, envs]).fetchall():
            rows.append({"step_id": step_id, "trajectory_id": traj, "env_id": env, "step_index": index, "reason": reasons[env]})
        con.close()
        out.environments = envs
    out.steps = len(rows)
    assert out.path is not None
    out.path.parent.mkdir(parents=True, exist_ok=True)
    write_table(out.path, rows, NONDETERMINISTIC)
    with atomic_path(out.path.with_suffix(".json")) as tmp:
        tmp.write_text(json.dumps({
            "check": "delta_roundtrip", "ok": not rows,
            "headline": (f"{len(out.environments)} environment(s) quarantined ({len(rows)} steps excluded): "
                         + ", ".join(out.environments)) if rows else "every step verified",
            "environments": out.environments, "parts": sorted(Path(p).name for p in parts),
            "mismatches": report.problems[:200],
        }, indent=1))
    return out
