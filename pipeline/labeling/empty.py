"""Why a labeling result is empty: an explanation built from what collection and labeling recorded."""

from __future__ import annotations

import json
from collections import Counter

import pyarrow.dataset as ds

from pipeline.store.layout import DataLayout


def _top(reasons: Counter[str]) -> str:
    return "; ".join(f"{count}× {reason[:200]}" for reason, count in reasons.most_common(5))


def why_empty(layout: DataLayout) -> str:
    """One paragraph saying why there are no labeled steps under ``layout`` (collection rejected everything,
    trajectories without actions, or labeling refused every trajectory), with the most frequent reasons."""
    issues: Counter[str] = Counter()
    if issue_files := layout.collection_issue_files():
        rows = ds.dataset(issue_files, format="parquet").to_table(columns=["stage", "reason"]).to_pylist()
        issues.update(f"{row['stage']}: {row['reason']}" for row in rows)
    files = layout.trajectory_files()
    trajectories = actions = 0
    if files:
        table = ds.dataset(files, format="parquet").to_table(columns=["num_actions"])
        trajectories = table.num_rows
        actions = sum(table.column("num_actions").to_pylist())
    if not trajectories:
        head = f"no trajectories were collected under {layout.root}"
        return head + (
            f": {sum(issues.values())} tasks/environments were rejected — {_top(issues)}"
            if issues
            else ": no source produced any (check resources.sources: every source off or empty?)"
        )
    if not actions:
        return (
            f"{trajectories} trajectories were collected but none has an action (exploration produced no calls: "
            f"no usable tools, or a call budget of 0)" + (f"; rejected: {_top(issues)}" if issues else "")
        )
    label_issues: Counter[str] = Counter()
    for sidecar in layout.steps_dir.glob("part-*.issues.json"):
        try:
            label_issues.update(str(issue.get("reason", "")) for issue in json.loads(sidecar.read_text())["issues"])
        except (OSError, ValueError, KeyError):
            continue
    if not layout.step_parts():
        return (
            f"{trajectories} trajectories with {actions} actions are collected but not labeled yet: "
            f"materialize 'labeled_steps'"
        )
    return f"labeling ran over {trajectories} trajectories ({actions} actions) and kept no step" + (
        f": {_top(label_issues)}" if label_issues else " (no trajectory reported an issue)"
    )
