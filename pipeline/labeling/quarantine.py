"""Quarantine: one environment's bad labels never block the others (docs/definitions.md §4.4).

The one home of the concept, used by both checks that can find bad labels:

* ``delta_roundtrip`` (:func:`quarantine`): a step's Δ does not reproduce its recorded s'_t hash;
* ``relabel_is_deterministic`` (:mod:`pipeline.labeling.determinism`): a re-execution in a fresh
  child differs from the stored labels, or cannot reset.

Either writes *findings* — ``determinism/<kind>-<scope>.parquet`` (step id, environment, reason: :data:`FINDINGS`) plus
a ``.json`` sidecar (:func:`write_findings`: the check, ``ok``, the quarantined environments with their reasons,
``strict``, the step parts it applies to). Every step of a quarantined *environment* is in the findings; stratification
excludes them with the reason (:func:`excluded_files`), the asset check fails with severity WARN (so the other
environments go on to the splits) naming the environments, and the run summary names them (:func:`failed_checks`) and
exits 0. ``strict`` (``ENVSIM_STRICT``, or the check's ``strict`` config) makes a quarantine blocking: the check fails
with severity ERROR and the summary exits non-zero.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pyarrow as pa

from pipeline.core.untrusted import md
from pipeline.report.tables import Facts, Markdown, Table
from pipeline.store.duck import connect
from pipeline.store.layout import DataLayout
from pipeline.store.parquet_io import atomic_path, write_table
from pipeline.store.reconstruct import VerifyReport

#: a findings file: the excluded steps with their reason
FINDINGS = pa.schema(
    [
        pa.field("step_id", pa.string(), nullable=False),
        pa.field("trajectory_id", pa.string(), nullable=False),
        pa.field("env_id", pa.string(), nullable=False),
        pa.field("step_index", pa.int32(), nullable=False),
        pa.field("reason", pa.string(), nullable=False),
    ]
)


def write_findings(path: Path, rows: list[dict[str, Any]], doc: dict[str, Any], parts: list[str]) -> None:
    """Write a check's findings (``rows``: :data:`FINDINGS`) and its sidecar (``doc`` plus the step parts
    it applies to and ``quarantined``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_table(path, rows, FINDINGS)
    with atomic_path(path.with_suffix(".json")) as tmp:
        tmp.write_text(
            json.dumps(
                {**doc, "quarantined": bool(doc.get("environments")), "parts": sorted(Path(p).name for p in parts)},
                indent=1,
            )
        )


def excluded_files(layout: DataLayout, gate: bool = True) -> list[str]:
    """The findings files that apply to the current step parts (a file written for other parts — an older labeling — is
    ignored); with ``gate``, also the quality gate's (``layout.quality_gate``: the environments that fail the executor's
    checks, :mod:`pipeline.quality.environment_report`), which the gate's own judging leaves out (``gate=False``)."""
    current = {Path(p).name for p in layout.step_parts()}
    out = []
    found = [
        *layout.determinism_dir.glob("nondeterministic-*.parquet"),
        *layout.determinism_dir.glob("quarantine-*.parquet"),
        *([layout.quality_gate] if gate and layout.quality_gate.exists() else []),
    ]
    for path in sorted(found):
        sidecar = path.with_suffix(".json")
        try:
            parts = set(json.loads(sidecar.read_text())["parts"])
        except (OSError, ValueError, KeyError):
            continue
        if parts <= current:
            out.append(str(path))
    return out


def input_fingerprint(layout: DataLayout, gate: bool = True) -> str:
    """Content fingerprint of the labeled steps (their parts are named by content keys) and of the
    steps the determinism check (and with ``gate``, the quality gate) excluded (when they excluded any)."""
    parts = sorted(Path(p).name for p in layout.step_parts())
    if files := excluded_files(layout, gate):
        rows = connect().execute("SELECT DISTINCT step_id FROM read_parquet(?) ORDER BY step_id", [files]).fetchall()
        if rows:
            excluded = "\n".join(r[0] for r in rows)
            parts.append("nondeterministic:" + hashlib.blake2b(excluded.encode(), digest_size=8).hexdigest())
    return hashlib.blake2b("\n".join(parts).encode(), digest_size=8).hexdigest()


def quarantined(layout: DataLayout) -> dict[str, str]:
    """Every environment the checks of the current step parts quarantined (the Δ round trip's and the determinism
    check's; not the quality gate's verdicts), with the reason first found for it."""
    found: dict[str, str] = {}
    for path in excluded_files(layout, gate=False):
        doc = json.loads(Path(path).with_suffix(".json").read_text())
        for env in doc.get("environments", []):
            found.setdefault(env, str((doc.get("reasons") or {}).get(env) or doc.get("headline", "")))
    return found


def failed_checks(layout: DataLayout) -> list[dict[str, Any]]:
    """The sidecars of every failed check of the current step parts (for the run summary); each has
    ``check``, ``headline``, ``environments``, ``quarantined`` and ``strict``."""
    out = []
    for path in excluded_files(layout, gate=False):  # the gate's environments: its own lines (environment_report)
        doc = json.loads(Path(path).with_suffix(".json").read_text())
        if not doc.get("ok", True):
            doc.setdefault("check", "relabel_is_deterministic")
            doc.setdefault("quarantined", bool(doc.get("environments")))
            doc.setdefault("strict", False)
            out.append(doc)
    return out


def blocking(failed: list[dict[str, Any]], strict: bool = False) -> bool:
    """Whether failed checks stop a run: in strict mode (``strict`` or a check run strict), or when a
    check failed without quarantining any environment (nothing to exclude: nothing proved)."""
    return any(strict or doc.get("strict") or not doc.get("quarantined") for doc in failed)


def quarantine(layout: DataLayout, report: VerifyReport, strict: bool = False) -> Facts:
    """Write (or clear) the quarantine findings for the environments of the failed trajectories; its facts (the
    ``delta_roundtrip`` check's metadata): what was verified, the environments quarantined (also a warning) and
    their steps, and the problems."""
    parts = layout.step_parts()
    envs: list[str] = []
    rows: list[dict] = []
    reasons: dict[str, str] = {}
    if report.failed_trajectories and parts:
        con = connect()
        failing = sorted(set(report.failed_trajectories))
        first = {}
        for problem in report.problems:
            first.setdefault(problem.split("#")[0].split(":")[0], problem)
        reasons = {
            env: f"quarantined: delta_roundtrip failed in this environment ({first.get(traj, traj)[:300]})"
            for env, traj in con.execute(
                "SELECT env_id, min(trajectory_id) FROM read_parquet(?) WHERE trajectory_id IN (SELECT unnest(?)) "
                "GROUP BY 1 ORDER BY 1",
                [parts, failing],
            ).fetchall()
        }
        envs = list(reasons)
        steps = con.execute(
            "SELECT step_id, trajectory_id, env_id, step_index FROM read_parquet(?) WHERE env_id IN (SELECT "
            "unnest(?)) ORDER BY step_id",
            [parts, envs],
        )
        rows = [{**step, "reason": reasons[step["env_id"]]} for step in steps.to_arrow_table().to_pylist()]
        con.close()
    write_findings(
        layout.determinism_findings("quarantine"),
        rows,
        {
            "check": "delta_roundtrip",
            "ok": not rows,
            "strict": strict,
            "headline": (f"{len(envs)} environment(s) quarantined ({len(rows)} steps excluded): " + ", ".join(envs))
            if rows
            else "every step verified",
            "environments": envs,
            "reasons": reasons if rows else {},
            "mismatches": report.problems[:200],
        },
        parts,
    )
    return Facts(
        {
            "trajectories": report.trajectories,
            "steps_verified": report.steps,
            "quarantined_environments": Table([{"env_id": e} for e in envs], ["env_id"]),
            "quarantined_steps": len(rows),
            "strict": strict,
            "problems": Markdown("\n".join(f"- {md(p)}" for p in report.problems[:50]) or "_none_"),
        },
        [f"delta_roundtrip: quarantined {', '.join(envs)} ({len(rows)} steps excluded from the splits)"]
        if envs
        else [],
    )
