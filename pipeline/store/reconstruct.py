"""Rebuild full states from initial state + Δs and verify them against the recorded hashes (the one Δ replay)."""

from __future__ import annotations

from collections.abc import Container, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import pyarrow.dataset as ds
import pyarrow.parquet as pq

from pipeline.core.canonical import CanonicalTextCache, text_hash
from pipeline.core.delta import apply
from pipeline.store.layout import DataLayout
from pipeline.store.schema import decode_delta
from pipeline.store.trajectories import iter_trajectory_rows
from pipeline.store.verdicts import code_digest, kept, labeled_digests

#: one stored step as :func:`replay` reads it: (step id, stored Δ, s_t hash, s'_t hash)
StoredStep = tuple[str, Sequence[dict[str, Any]], str, str]


class ReplayError(ValueError):
    """The stored Δs do not rebuild the recorded states; the message names the trajectory or step,
    ``index`` is the position of the step (None: the initial state)."""

    def __init__(self, message: str, index: int | None = None) -> None:
        super().__init__(message)
        self.index = index


def replay(
    trajectory_id: str,
    initial_json: str,
    initial_hash: str,
    steps: Sequence[StoredStep],
    wanted: Container[int] | None = None,
) -> Iterator[tuple[int, Any, Any, str, str]]:
    """Rebuild one trajectory's states from its stored initial state and Δs (``steps`` in step order): yields
    ``(i, s_t, s'_t, s_t text, s'_t text)`` (stored JSON texts) for every position ``i`` in ``wanted`` (None: all),
    each state verified against its hash; :class:`ReplayError` at the first that does not verify or apply. The
    states share structure: treat them as immutable."""
    stored = CanonicalTextCache(ordered=True)  # the texts as stored; parsing seeds it with the subtrees' texts
    hashed = CanonicalTextCache()  # the sorted texts the hashes are taken over
    state = stored.parse(initial_json)
    if text_hash(hashed.text(state)) != initial_hash:
        raise ReplayError(f"{trajectory_id}: stored initial state does not match its hash")
    text: str | None = initial_json  # stored text of ``state`` when known, and its hash
    known: str | None = initial_hash
    for i, (step_id, delta, before_hash, after_hash) in enumerate(steps):
        keep = wanted is None or i in wanted
        if keep:
            if text is None:
                text = stored.text(state)
                known = text_hash(hashed.text(state))
            if known != before_hash:
                raise ReplayError(f"{step_id}: s_t hash {before_hash} != reconstructed {known}", i)
            before_state, before_text = state, text
        try:
            state = apply(decode_delta(delta, before=False), state)
        except ValueError as exc:  # DeltaError, or a Δ value that is not JSON
            raise ReplayError(f"{step_id}: Δ does not apply to the reconstructed s_t: {exc}", i) from exc
        if keep:
            text = stored.text(state)
            known = text_hash(hashed.text(state))
            if known != after_hash:
                raise ReplayError(f"{step_id}: s_t + Δ hashes to {known}, recorded s'_t is {after_hash}", i)
            yield i, before_state, state, before_text, text
        elif delta:
            text = known = None


def stored_steps(rows: Iterable[dict[str, Any]]) -> list[StoredStep]:
    """Step-table rows (in step order) as :func:`replay` reads them."""
    return [(r["step_id"], r["delta"], r["state_before_hash"], r["state_after_hash"]) for r in rows]


@dataclass
class VerifyReport:
    trajectories: int = 0
    steps: int = 0
    problems: list[str] = field(default_factory=list)
    failed_trajectories: list[str] = field(default_factory=list)
    #: the verification this report was kept from, when the same files were verified before (:func:`kept_verification`)
    kept_from: str | None = None

    @property
    def ok(self) -> bool:
        return not self.problems


def _verify_trajectory(traj: dict[str, Any], steps: list[dict[str, Any]], report: VerifyReport) -> None:
    """Replay one trajectory's steps (``traj``: its row, with the initial state and its hash) into ``report`` (a
    trajectory with a problem joins its failed ones)."""
    trajectory_id = traj["trajectory_id"]
    before = len(report.problems)
    ordered = sorted(steps, key=lambda s: s["step_index"])
    stored = [
        (f"{trajectory_id}#{s['step_index']}", s["delta"], s["state_before_hash"], s["state_after_hash"])
        for s in ordered
    ]
    try:
        for i, *_ in replay(trajectory_id, traj["initial_state_json"], traj["initial_state_hash"], stored):
            report.steps += 1
            step = ordered[i]
            if step["delta_size"] != len(step["delta"]):
                report.problems.append(
                    f"{stored[i][0]}: |Δ| = {step['delta_size']} but Δ has {len(step['delta'])} records"
                )
    except ReplayError as exc:
        report.steps += exc.index is not None  # the step that failed was checked too
        report.problems.append(str(exc))
    if len(report.problems) > before:
        report.failed_trajectories.append(trajectory_id)


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
            _verify_trajectory(traj, by_traj.pop(traj["trajectory_id"]), report)
        for orphan in by_traj:
            report.problems.append(f"{orphan}: steps without a trajectory row")
            report.failed_trajectories.append(orphan)
        if len(report.problems) >= max_problems:
            break
    return report


def kept_verification(layout: DataLayout, max_problems: int = 50) -> VerifyReport:
    """:func:`verify_steps`, once per content of the step parts and trajectory files and per code of ``pipeline``
    (kept in ``quality/delta_roundtrip_verdict[-<partition>].json``)."""
    inputs = {**labeled_digests(layout), "max_problems": max_problems, "code": code_digest()}
    return kept(
        layout.verdict("delta_roundtrip"),
        inputs,
        lambda: verify_steps(layout, max_problems),
        asdict,
        lambda doc, key: VerifyReport(**{**doc, "kept_from": key}),
    )


def materialize_states(layout: DataLayout, trajectory_id: str) -> list[tuple[dict[str, Any], Any, Any]]:
    """Full ``(step, s_t, s'_t)`` for one trajectory, verified against the recorded hashes."""
    rows = list(iter_trajectory_rows(layout, ids=[trajectory_id]))
    if not rows:
        raise KeyError(f"unknown trajectory {trajectory_id!r}")
    steps = (
        ds.dataset(layout.step_parts(), format="parquet")
        .to_table(filter=ds.field("trajectory_id") == trajectory_id)
        .sort_by("step_index")
        .to_pylist()
    )
    return [
        (steps[i], before, after)
        for i, before, after, _, _ in replay(
            trajectory_id, rows[0]["initial_state_json"], rows[0]["initial_state_hash"], stored_steps(steps)
        )
    ]
