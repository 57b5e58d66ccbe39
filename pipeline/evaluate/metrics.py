"""Feedback Match, Config Match (exact, as the paper defines it) and CM-lenient (what the reference
evaluation code computes), per sample.

* **FM**: the predicted feedback equals the true observation after both are parsed (JSON, then
  Python literal, else the text itself) — exact equality of canonical forms.
* **CM**: the predicted changes, applied to ``s_t``, reproduce ``s'_t`` exactly. Changes that do not
  apply (missing path, bad type) score 0.
* **CM-lenient**: the predicted state (changes applied where they can be) has the true value at every
  truly changed path; extra predicted changes are not penalised, and for a removed key the check only
  compares "value at path" — a prediction that leaves the key with the value null, or deletes it,
  both pass, so removals are mis-scored. With |Δ| = 0 any prediction passes.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any

from pipeline.export.protocol import ChangeError, apply_changes, parse_observation
from pipeline.state.canonical import canonical_json, canonicalize

_MISSING = object()


def _canon(value: Any) -> str:
    return canonical_json(canonicalize(value))


def feedback_match(predicted: Any, raw_observation: str) -> bool:
    return _canon(parse_observation(predicted)) == _canon(parse_observation(raw_observation))


def config_match(state_before: Any, state_after: Any, changes: Any) -> tuple[bool, str | None]:
    try:
        predicted = apply_changes(state_before, changes)
    except ChangeError as exc:
        return False, str(exc)
    return _canon(predicted) == _canon(state_after), None


def _lenient_apply(state: Any, changes: Any) -> Any:
    result = copy.deepcopy(state)
    for change in changes if isinstance(changes, list) else []:
        if not isinstance(change, dict):
            continue
        path = change.get("path")
        path = [path] if isinstance(path, str) else path
        if not isinstance(path, list) or not path:
            continue
        parent = result
        for key in path[:-1]:
            if not isinstance(parent, dict):
                break
            parent = parent.setdefault(str(key), {})
        if not isinstance(parent, dict):
            continue
        if change.get("type") == "delete":
            parent.pop(str(path[-1]), None)
        else:
            parent[str(path[-1])] = copy.deepcopy(change.get("value"))
    return result


def _get(state: Any, path: list[str]) -> Any:
    for key in path:
        if not isinstance(state, dict) or key not in state:
            return None
        state = state[key]
    return state


def config_match_lenient(state_before: Any, state_after: Any, true_delta: list[dict[str, Any]], changes: Any) -> bool:
    predicted = _lenient_apply(state_before, changes)
    for rec in true_delta:
        path = list(rec["path"])
        if _canon(_get(predicted, path)) != _canon(_get(state_after, path)):
            return False
    return True


@dataclass(frozen=True)
class Score:
    fm: bool
    cm: bool
    cm_lenient: bool
    change_error: str | None = None


def score(sample: dict[str, Any], answer: dict[str, Any] | None) -> Score:
    """Score one parsed answer against a benchmark sample (a malformed answer scores 0 on all)."""
    if answer is None:
        return Score(False, False, False, "unparseable answer")
    before = json.loads(sample["state_before_json"])
    after = json.loads(sample["state_after_json"])
    delta = [{"op": d["op"], "path": list(d["path"])} for d in sample["delta"]]
    cm, error = config_match(before, after, answer.get("config_changes", []))
    return Score(
        fm=feedback_match(answer.get("feedback"), sample["raw_observation"]),
        cm=cm,
        cm_lenient=config_match_lenient(before, after, delta, answer.get("config_changes", [])),
        change_error=error,
    )
