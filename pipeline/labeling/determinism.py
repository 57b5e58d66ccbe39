"""Determinism check (docs/definitions.md §4.4): labels must be reproducible, and what is not is made visible.

Two comparisons, both against the stored step table:

* **exploration vs labeling** — every explored action carries the ``s'_t`` hash the policy saw when it
  ran the call (``observed_after_hash``); labeling re-executed it from scratch under the same frozen
  clock and seeds, so every explored step is compared, at no extra cost;
* **re-execution** — a seeded sample of trajectories is re-executed in fresh processes and every label
  field (all but timing) compared.

Steps that differ — and the later steps of their trajectory, whose ``s_t`` cannot be rebuilt from the
initial config — are written to ``determinism/nondeterministic-<scope>.parquet`` with the reason;
``step_strata`` excludes them from both splits. The report counts them per environment, and the
asset check fails (blocking) naming the environments.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds

from pipeline.store import schema
from pipeline.store.layout import DataLayout
from pipeline.store.parquet_io import atomic_path, write_table
from pipeline.store.trajectories import iter_trajectories, iter_trajectory_rows
from pipeline.envs.catalog import load_blobs
from pipeline.execution.sandbox import Sandbox

#: every label column (timing is not one: it is kept out of the step table)
LABEL_FIELDS = schema.step_columns(schema.LABEL)

NONDETERMINISTIC = pa.schema([
    pa.field("step_id", pa.string(), nullable=False),
    pa.field("trajectory_id", pa.string(), nullable=False),
    pa.field("env_id", pa.string(), nullable=False),
    pa.field("step_index", pa.int32(), nullable=False),
    pa.field("reason", pa.string(), nullable=False),
])


@dataclass
class DeterminismReport:
    sampled: list[str] = field(default_factory=list)
    steps_compared: int = 0  # re-executed steps compared field by field
    explored_compared: int = 0  # explored steps compared with what exploration observed
    mismatches: list[str] = field(default_factory=list)  # human-readable, one per finding
    excluded: list[dict[str, Any]] = field(default_factory=list)  # NONDETERMINISTIC rows
    path: Path | None = None

    @property
    def ok(self) -> bool:
        return not self.mismatches

    def by_env(self) -> dict[str, int]:
        """Excluded (non-deterministic or dependent) steps per environment."""
        return dict(sorted(Counter(r["env_id"] for r in self.excluded).items()))

    def environments(self) -> list[str]:
        """Environments with at least one non-deterministic step (not counting dependent steps)."""
        return sorted({r["env_id"] for r in self.excluded if not r["reason"].startswith("after ")})

    def headline(self) -> str:
        if self.ok:
            return (f"deterministic: {self.explored_compared} explored steps and {self.steps_compared} re-executed "
                    f"steps of {len(self.sampled)} trajectories reproduced exactly")
        envs = self.environments()
        return (f"NON-DETERMINISTIC labels in {len(envs)} environment(s): {', '.join(envs) or '(re-execution failures)'}; "
                f"{len(self.excluded)} step(s) excluded from the splits")


def _normalise(value: Any) -> Any:
    if isinstance(value, list):
        return [_normalise(v) for v in value]
    if isinstance(value, dict):
        return {k: _normalise(v) for k, v in value.items()}
    return value


def report_path(layout: DataLayout) -> Path:
    """Where the check writes its findings (one file per partition, or ``all``)."""
    return layout.determinism_findings("nondeterministic")


def excluded_files(layout: DataLayout) -> list[str]:
    """The findings files that apply to the current step parts (a file written for other parts —
    an older labeling — is ignored)."""
    current = {Path(p).name for p in layout.step_parts()}
    out = []
    found = [*layout.determinism_dir.glob("nondeterministic-*.parquet"),
             *layout.determinism_dir.glob("quarantine-*.parquet")]  # pipeline.labeling.quarantine
    for path in sorted(found):
        sidecar = path.with_suffix(".json")
        try:
            parts = set(json.loads(sidecar.read_text())["parts"])
        except (OSError, ValueError, KeyError):
            continue
        if parts <= current:
            out.append(str(path))
    return out


def check_determinism(layout: DataLayout, sandbox: Sandbox, sample_size: int = 20, seed: int = 0) -> DeterminismReport:
    """Compare explored steps with their observation and re-execute a seeded sample (``sample_size``
    < 0: every trajectory); write the findings; return the report."""

    load_blobs(layout)
    rows = list(iter_trajectory_rows(layout, columns=["trajectory_id", "env_id", "actions"]))
    ids = sorted(r["trajectory_id"] for r in rows)
    size = len(ids) if sample_size < 0 else min(sample_size, len(ids))
    report = DeterminismReport(sampled=random.Random(seed).sample(ids, size))
    parts = layout.step_parts()
    stored: dict[tuple[str, int], dict[str, Any]] = {}
    if parts:
        table = ds.dataset(parts, format="parquet").to_table(
            columns=["step_id", "trajectory_id", "env_id", "step_index", *LABEL_FIELDS])
        for row in table.to_pylist():
            stored[(row["trajectory_id"], row["step_index"])] = row
    first_bad: dict[str, tuple[int, str, str]] = {}  # trajectory -> (step index, env, reason)

    def flag(traj_id: str, env_id: str, index: int, reason: str) -> None:
        report.mismatches.append(f"{env_id}: {traj_id}#{index}: {reason}")
        if traj_id not in first_bad or index < first_bad[traj_id][0]:
            first_bad[traj_id] = (index, env_id, reason)

    for row in rows:
        for index, action in enumerate(row["actions"] or []):
            observed = action.get("observed_after_hash")
            step = stored.get((row["trajectory_id"], index))
            if not observed or step is None:
                continue
            report.explored_compared += 1
            if step["state_after_hash"] != observed:
                flag(row["trajectory_id"], row["env_id"], index,
                     "s'_t differs between exploration and labeling (same frozen clock and seeds)")
    if report.sampled:
        # in freshly forked children: labels made in a reused child must equal a fresh process's
        for traj, result in sandbox.run(iter_trajectories(layout, ids=report.sampled), fresh_children=True):
            if result["init"] is None:
                report.mismatches.append(f"{traj.env_id}: {traj.trajectory_id}: reset failed on re-execution: "
                                         f"{str(result['init_error'])[:300]}")
                continue
            fresh = {s["step_index"]: s for s in result["steps"]}
            old = {i for (t, i) in stored if t == traj.trajectory_id}
            if set(fresh) != old:
                report.mismatches.append(f"{traj.env_id}: {traj.trajectory_id}: {len(fresh)} steps re-executed, {len(old)} stored")
            for index in sorted(set(fresh) & old):
                report.steps_compared += 1
                a, b = fresh[index], stored[(traj.trajectory_id, index)]
                diffs = [f for f in LABEL_FIELDS if _normalise(a.get(f)) != _normalise(b[f])]
                if diffs:
                    flag(traj.trajectory_id, traj.env_id, index, f"{', '.join(diffs)} differ on re-execution")
    for (traj_id, index), step in sorted(stored.items()):
        bad = first_bad.get(traj_id)
        if bad is None or index < bad[0]:
            continue
        reason = f"non-deterministic: {bad[2]}" if index == bad[0] else f"after non-deterministic step {bad[0]}"
        report.excluded.append({"step_id": step["step_id"], "trajectory_id": traj_id, "env_id": step["env_id"],
                                "step_index": index, "reason": reason})
    report.path = report_path(layout)
    report.path.parent.mkdir(parents=True, exist_ok=True)
    write_table(report.path, report.excluded, NONDETERMINISTIC)
    with atomic_path(report.path.with_suffix(".json")) as tmp:
        tmp.write_text(json.dumps({
            "ok": report.ok, "headline": report.headline(), "environments": report.environments(),
            "excluded_by_env": report.by_env(), "parts": sorted(Path(p).name for p in parts),
            "mismatches": report.mismatches[:200],
        }, indent=1))
    return report


def failed_checks(layout: DataLayout) -> list[dict[str, Any]]:
    """Findings of every failed determinism check of the current step parts (for the run summary)."""
    out = []
    for path in excluded_files(layout):
        doc = json.loads(Path(path).with_suffix(".json").read_text())
        if not doc.get("ok", True):
            out.append(doc)
    return out
