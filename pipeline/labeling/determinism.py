"""Determinism check (docs/definitions.md §4.4): labels must be reproducible, and what is not is quarantined.

Each call is executed once to make its labels — most of them at collection (labels kept from collection,
:mod:`pipeline.labeling.rows`), the rest at labeling — so the check executes again and compares values of two
independent executions:

* **re-execution** — at least ``per_env`` trajectories of *every* environment (prefering trajectories
  with stored steps; labels kept from collection are candidates like any other), plus ``sample_size``
  more drawn from the rest (``-1``: all), seeded, are executed again in freshly forked children
  (``Sandbox.run(..., fresh_children=True)``, a new sandbox: other processes than the ones that made
  the labels; the asset's has one worker: no neighbour) on the varied host profile (another real CPU affinity:
  :func:`varied`). The re-execution's own initial-state hash is compared with the trajectory's recorded one, and
  its own labels of every step — observation, outcome, Δ, s_t and s'_t hashes, every :data:`LABEL_FIELDS` column —
  with the stored step. A reset that fails on re-execution while the stored trajectory has steps is a finding too,
  and so is a step that holds the host's real day (:func:`host_day`), which no re-execution on that day changes.
* **exploration vs labeling** — an explored action carries the s'_t hash the policy saw
  (``observed_after_hash``); for trajectories the labeling stage *executed again* (their part's
  sidecar lists them under ``executed``) that hash is compared with the labeled one. Labels kept
  from collection *are* the observed values, so they are not compared with themselves.

An environment with a finding is **quarantined** (:mod:`pipeline.labeling.quarantine`, the one home of the concept):
every one of its steps is written to ``determinism/nondeterministic-<scope>.parquet`` with the reason (the differing
step ``non-deterministic: …``, the later steps of its trajectory ``after non-deterministic step N``, the environment's
other steps ``non-deterministic environment (quarantined): …``); ``step_strata`` excludes them from both splits, and the
other environments go on. The asset check fails with severity WARN naming the environments, or ERROR (blocking) with
``strict``.

What the sandbox freezes (:mod:`pipeline.execution.freeze`) reproduces; what it cannot freeze — an object's address,
``os.read`` of ``/proc`` files, ``resource.getrusage``, a pid (it depends on what ran before in the environment's
instance, so the re-execution runs the sample in reverse order) — is what this check catches.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pyarrow.dataset as ds

from pipeline.core.clock import DEFAULT_CLOCK_START, parse_clock_start
from pipeline.core.trajectory import Trajectory
from pipeline.core.untrusted import md
from pipeline.envs.catalog import load_blobs
from pipeline.execution import freeze
from pipeline.execution.sandbox import Sandbox
from pipeline.labeling.quarantine import write_findings
from pipeline.labeling.steps import executed_at_labeling
from pipeline.report.tables import Facts, Markdown, Table
from pipeline.store import schema
from pipeline.store.layout import DataLayout
from pipeline.store.trajectories import iter_trajectories, iter_trajectory_rows
from pipeline.store.verdicts import code_digest, file_digest, kept, labeled_digests

#: every label column (timing is not one: it is kept out of the step table)
LABEL_FIELDS = schema.step_columns(schema.LABEL)

CHECK = "relabel_is_deterministic"


@dataclass
class DeterminismReport:
    sampled: list[str] = field(default_factory=list)  # trajectories re-executed
    per_env: int = 0  # of which picked per environment (the rest: the extra sample)
    steps_compared: int = 0  # re-executed steps compared field by field
    explored_compared: int = 0  # steps labeled by a second execution compared with what exploration observed
    mismatches: list[str] = field(default_factory=list)  # human-readable, one per finding
    reasons: dict[str, str] = field(default_factory=dict)  # quarantined environment -> its first finding
    excluded: list[dict[str, Any]] = field(default_factory=list)  # FINDINGS rows
    strict: bool = False
    path: Path | None = None
    kept_from: str | None = None  # the key of the last run's report read instead of executing again

    @property
    def ok(self) -> bool:
        return not self.mismatches

    def by_env(self) -> dict[str, int]:
        """Excluded steps per environment."""
        return dict(sorted(Counter(r["env_id"] for r in self.excluded).items()))

    def quarantined(self) -> list[str]:
        """Environments quarantined: a re-execution differed from their labels, or could not reset."""
        return sorted(self.reasons)

    def headline(self) -> str:
        if self.ok:
            return (
                f"deterministic: {self.steps_compared} re-executed steps of {len(self.sampled)} trajectories "
                f"({self.per_env} picked per environment) and {self.explored_compared} explored steps reproduced "
                "exactly"
            )
        envs = self.quarantined()
        return (
            f"NON-DETERMINISTIC labels in {len(envs)} environment(s): {', '.join(envs) or '(unattributed)'}; "
            f"quarantined: {len(self.excluded)} step(s) excluded from the splits"
            + ("; strict: blocking" if self.strict else "; the other environments go on")
        )

    def facts(self) -> Facts:
        """What the check reports (its metadata); when it is not ok, the headline and each quarantined
        environment's reason as warnings."""
        reasons = [{"env_id": e, "reason": r[:300]} for e, r in self.reasons.items()]
        by_env = [
            {"env_id": e, "excluded_steps": n, "reason": self.reasons.get(e, "")[:300]}
            for e, n in self.by_env().items()
        ]
        warnings = [f"{CHECK}: {self.headline()}", *(f"  quarantined {r['env_id']}: {r['reason']}" for r in reasons)]
        return Facts(
            {
                "headline": self.headline(),
                "sampled_trajectories": len(self.sampled),
                "sampled_per_environment": self.per_env,
                "steps_compared": self.steps_compared,
                "explored_steps_compared": self.explored_compared,
                "quarantined_environments": Table(reasons, ["env_id", "reason"]),
                "nondeterministic_environments": ", ".join(self.quarantined()) or "none",
                "excluded_steps": len(self.excluded),
                "excluded_by_env": Table(by_env, ["env_id", "excluded_steps", "reason"]),
                "strict": self.strict,
                "mismatches": Markdown("\n".join(f"- {md(m[:500])}" for m in self.mismatches[:50]) or "_none_"),
                "findings": self.path.resolve() if self.path else "",
                **(
                    {"checked": f"before, on the same labels and code (report {self.kept_from})"}
                    if self.kept_from
                    else {}
                ),
            },
            [] if self.ok else warnings,
        )


def report_path(layout: DataLayout) -> Path:
    """Where the check writes its findings (one file per partition, or ``all``)."""
    return layout.determinism_findings("nondeterministic")


def _rank(seed: int, trajectory_id: str) -> bytes:
    return hashlib.blake2b(f"{seed}:{trajectory_id}".encode(), digest_size=8).digest()


def pick(
    rows: list[dict[str, Any]], with_steps: set[str], per_env: int, sample_size: int, seed: int
) -> tuple[list[str], int]:
    """(trajectories to re-execute, how many of them were picked per environment): ``per_env`` per
    environment — trajectories with stored steps first, seeded order — then ``sample_size`` more of the
    rest (``< 0``: all of them)."""
    by_env: dict[str, list[str]] = {}
    for row in rows:
        by_env.setdefault(row["env_id"], []).append(row["trajectory_id"])
    chosen: list[str] = []
    for env in sorted(by_env):
        ranked = sorted(by_env[env], key=lambda t: (t not in with_steps, _rank(seed, t)))
        chosen.extend(ranked[: max(0, per_env)])
    picked = set(chosen)
    rest = sorted(r["trajectory_id"] for r in rows if r["trajectory_id"] not in picked)
    extra = rest if sample_size < 0 else random.Random(seed).sample(rest, min(sample_size, len(rest)))
    return sorted(picked | set(extra)), len(chosen)


def _steps(parts: list[str], columns: list[str], key: str, values: list[str]) -> list[dict[str, Any]]:
    if not parts or not values:
        return []
    return ds.dataset(parts, format="parquet").to_table(columns=columns, filter=ds.field(key).isin(values)).to_pylist()


#: a rendering of the host's real day in a label: its ISO, compact and slashed dates, or epoch seconds or
#: milliseconds (:func:`host_day`), the day before, of and after the check
_DAY_FORMATS = ("%Y-%m-%d", "%Y%m%d", "%d/%m/%Y", "%m/%d/%Y")


def host_day(text: str, now: float) -> str | None:
    """The first rendering in ``text`` of the host's real day around ``now`` (a date within a day either side,
    epoch seconds or milliseconds within two days), or None."""
    days = sorted({datetime.fromtimestamp(now + k * 86_400, UTC).date() for k in (-1, 0, 1)})
    dates = [d.strftime(f) for d in days for f in _DAY_FORMATS]
    lead = str(int(now))[:4]  # two days either side move at most the fifth digit of today's epoch seconds
    epoch = rf"{lead}\d{{6}}(?:\d{{3}})?"
    for m in re.finditer(rf"(?<![\d.])(?:{'|'.join(map(re.escape, dates))}|{epoch})(?!\d)", text):
        found = m.group(0)
        if found in dates or abs(int(found) / (1000 if len(found) == 13 else 1) - now) <= 2 * 86_400:
            return found
    return None


def _labels_text(step: dict[str, Any]) -> str:
    """What a re-executed step answered and changed, as text (its observation, error and Δ)."""
    delta = json.dumps(step.get("delta") or [], default=str, ensure_ascii=False)
    return "\n".join(str(step.get(f) or "") for f in ("raw_observation", "observation_json", "error_message")) + delta


def varied(trajectory: Trajectory) -> Trajectory:
    """``trajectory`` to be executed on the varied host profile (:func:`pipeline.execution.freeze.host_profile`)."""
    return replace(trajectory, meta={**trajectory.meta, freeze.HOST_PROFILE: freeze.VARIED})


def check_determinism(
    layout: DataLayout, sandbox: Sandbox, sample_size: int = 20, seed: int = 0, per_env: int = 1, strict: bool = False
) -> DeterminismReport:
    """Re-execute ``per_env`` trajectories of every environment plus a seeded sample of ``sample_size``
    more (``< 0``: every trajectory) in fresh children and compare them with the stored labels; compare
    steps labeled by a second execution with what exploration observed; quarantine the environments
    with a finding; write the findings; return the report."""

    load_blobs(layout)
    parts = layout.step_parts()
    rows = list(iter_trajectory_rows(layout, columns=["trajectory_id", "env_id", "initial_state_hash"]))
    recorded = {r["trajectory_id"]: r["initial_state_hash"] for r in rows}
    with_steps: set[str] = set()
    if parts:
        ids = ds.dataset(parts, format="parquet").to_table(columns=["trajectory_id"]).column("trajectory_id")
        with_steps = set(pc.unique(ids).to_pylist())
    sampled, per = pick(rows, with_steps, per_env, sample_size, seed)
    report = DeterminismReport(sampled=sampled, per_env=per, strict=strict)
    first_bad: dict[str, tuple[str, int, str]] = {}  # env -> (trajectory, step index, reason)

    def flag(traj_id: str, env_id: str, index: int, reason: str) -> None:
        report.mismatches.append(f"{env_id}: {traj_id}#{index}: {reason}")
        if env_id not in first_bad or (traj_id, index) < first_bad[env_id][:2]:
            first_bad[env_id] = (traj_id, index, reason)

    # exploration vs labeling: only where the labeling stage executed the trajectory a second time
    executed = sorted(executed_at_labeling(layout) & with_steps)
    if executed:
        labeled = {
            (s["trajectory_id"], s["step_index"]): s["state_after_hash"]
            for s in _steps(parts, ["trajectory_id", "step_index", "state_after_hash"], "trajectory_id", executed)
        }
        for row in iter_trajectory_rows(layout, columns=["trajectory_id", "env_id", "actions"], ids=executed):
            for index, action in enumerate(row["actions"] or []):
                observed = action.get("observed_after_hash")
                after = labeled.get((row["trajectory_id"], index))
                if not observed or after is None:
                    continue
                report.explored_compared += 1
                if after != observed:
                    flag(
                        row["trajectory_id"],
                        row["env_id"],
                        index,
                        "s'_t differs between exploration and labeling (same frozen clock and seeds)",
                    )

    # re-execution in freshly forked children, compared with the stored labels
    stored: dict[str, dict[int, dict[str, Any]]] = {}  # trajectory -> step index -> stored labels
    for s in _steps(parts, ["trajectory_id", "step_index", *LABEL_FIELDS], "trajectory_id", sampled):
        stored.setdefault(s["trajectory_id"], {})[s["step_index"]] = s
    # in reverse order: in an environment's own instance a label that depends on what ran before it there (a pid in its
    # PID namespace, a counter the zygote carries) differs from the labeling run's on the varied host profile (another
    # CPU affinity: freeze.host_profile), so a label that depends on the machine differs too
    again = [varied(t) for t in iter_trajectories(layout, ids=sampled)][::-1] if sampled else []  # isin([]): null
    runs = sandbox.run(again, fresh_children=True) if again else iter(())
    now = freeze.REAL.time()
    for traj, result in runs:
        tid, env = traj.trajectory_id, traj.env_id
        steps = stored.get(tid, {})
        old = set(steps)
        if result["init"] is None:
            if old:  # it reset once (its steps are stored), not now
                flag(tid, env, 0, f"reset failed on re-execution: {str(result['init_error'])[:300]}")
            continue
        if result["init"].get("state_hash") != recorded.get(tid):
            flag(tid, env, 0, "initial state differs on re-execution")
        fresh = {s["step_index"]: s for s in result["steps"]}
        # a label holding the host's real day, where the frozen clock is on another: a clock the sandbox did not freeze
        # (the same all day long, which a re-execution on the same day cannot tell apart)
        if abs(parse_clock_start(traj.clock_start or DEFAULT_CLOCK_START) - now) > 3 * 86_400:
            given = str(result["init"].get("state_json") or "")  # a date the scenario or the call brought is its own
            for index in sorted(fresh):
                if index < len(traj.actions):
                    given += json.dumps(traj.actions[index].arguments, ensure_ascii=False)
                day = host_day(_labels_text(fresh[index]), now)
                if day is not None and day not in given:
                    flag(tid, env, index, f"holds the host's real date ({day}), not the frozen clock's")
                    break
        if set(fresh) != old:
            flag(tid, env, min(set(fresh) ^ old), f"{len(fresh)} steps re-executed, {len(old)} stored")
        for index in sorted(set(fresh) & old):
            report.steps_compared += 1
            a, b = fresh[index], steps[index]
            diffs = [f for f in LABEL_FIELDS if a.get(f) != b[f]]
            if diffs:
                flag(tid, env, index, f"{', '.join(diffs)} differ on re-execution")

    # quarantine: every step of an environment with a finding
    report.reasons = {env: f"{t}#{i}: {why}" for env, (t, i, why) in sorted(first_bad.items())}
    for step in sorted(
        _steps(parts, ["step_id", "trajectory_id", "env_id", "step_index"], "env_id", sorted(first_bad)),
        key=lambda s: s["step_id"],
    ):
        bad_traj, bad_index, why = first_bad[step["env_id"]]
        if step["trajectory_id"] == bad_traj and step["step_index"] == bad_index:
            reason = f"non-deterministic: {why}"
        elif step["trajectory_id"] == bad_traj and step["step_index"] > bad_index:
            reason = f"after non-deterministic step {bad_index}"
        else:
            reason = f"non-deterministic environment (quarantined): {bad_traj}#{bad_index}: {why}"
        report.excluded.append({**step, "reason": reason[:1000]})
    report.path = report_path(layout)
    write_findings(
        report.path,
        report.excluded,
        {
            "check": CHECK,
            "ok": report.ok,
            "strict": strict,
            "headline": report.headline(),
            "environments": report.quarantined(),
            "reasons": report.reasons,
            "excluded_by_env": report.by_env(),
            "sampled": len(report.sampled),
            "steps_compared": report.steps_compared,
            "explored_compared": report.explored_compared,
            "mismatches": report.mismatches[:200],
        },
        parts,
    )
    return report


def kept_determinism(
    layout: DataLayout, sandbox: Sandbox, sample_size: int = 20, seed: int = 0, per_env: int = 1, strict: bool = False
) -> DeterminismReport:
    """:func:`check_determinism`, once per content of what it reads (the step parts and trajectory files, the
    catalog's class code and tool schemas, by their bytes), per code of the ``pipeline`` package and per settings
    (the sandbox's isolation and limits included): a resumed or repeated run whose labels did not change reads the
    report the last check wrote (``quality/determinism_verdict.json``; a partition's
    ``determinism_verdict-<partition>.json``) while its findings file is there, instead of executing the sample again
    (so nondeterminism that did not show in that execution is not looked for again until the inputs change); a lazy
    ``sandbox`` then starts no process."""
    catalog = [(p.name, file_digest(p)) for p in (layout.environments, layout.tool_code) if p.exists()]
    settings = {"sample_size": sample_size, "seed": seed, "per_env": per_env, "strict": strict}
    settings |= {"isolation": sandbox.isolation, "limits": asdict(sandbox.limits)}
    inputs = {**labeled_digests(layout), "catalog": catalog, **settings, "code": code_digest()}

    def dump(report: DeterminismReport) -> dict[str, Any]:  # no path: a moved root reads it too
        return {k: v for k, v in asdict(report).items() if k not in ("path", "kept_from")}

    def load(doc: dict[str, Any], key: str) -> DeterminismReport:
        path = report_path(layout)
        if not path.is_file():  # its findings are gone: check again, which writes them
            raise FileNotFoundError(path)
        return DeterminismReport(**doc, path=path, kept_from=key)

    check = partial(check_determinism, layout, sandbox, sample_size, seed, per_env, strict)
    return kept(layout.verdict("determinism"), inputs, check, dump, load)
