"""Per-sample metrics: Feedback Match and exact Config Match (primary, as the paper defines them),
``cm_changed_paths`` (a diagnostic), and ``cm_reference`` / ``fm_reference`` (what the EnvSimBench
evaluation code computes, quirks included — :mod:`pipeline.envsimbench.reference`).

* **FM**: the predicted feedback equals the true observation after both are parsed (JSON, then
  Python literal, else the text itself) — exact equality of canonical forms; the feedback may be a
  JSON value or the string the tool returned.
* **CM**: the predicted changes, applied to ``s_t``, reproduce ``s'_t`` exactly (values compared as
  canonical JSON: ``1`` is not ``1.0`` is not ``true``). Answers in our format and the reference's
  are accepted (:func:`pipeline.core.protocol.apply_changes`); changes that do not apply score 0.
* **cm_changed_paths**: the predicted state (changes applied where they can
  be) has the true value, exactly, at every path of the true Δ; spurious predicted changes elsewhere
  are not penalised, and a truly removed key passes whether the prediction deletes it or sets it to
  null. It is *not* the reference CM (no Python ``==``, no dotted-path splitting, correct deletes pass).
* **cm_reference / fm_reference**: see :mod:`pipeline.envsimbench.reference`.

States are compared in their plain form (:func:`pipeline.core.protocol.plain`), so an answer that
writes a big integer as a JSON number matches a state that stores it as ``{"$int": …}``.

Bounded (:mod:`pipeline.core.bounds`): a feedback string nested deeper than ``MAX_DEPTH`` levels is
compared as its text (not parsed), a change whose path has more than ``MAX_PATH_PARTS`` parts does not
apply (CM: 0 with that reason; ``cm_changed_paths``: skipped) — no ``RecursionError``, no unbounded work.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any

from pipeline.core.bounds import MAX_DEPTH, MAX_PATH_PARTS, path_parts, too_deep, value_depth
from pipeline.core.canonical import canonical_json, canonicalize
from pipeline.core.protocol import (
    CHANGE_TYPES,
    ChangeError,
    change_value,
    json_copy,
    non_finite_free,
    parse_observation,
    plain,
    plain_text,
    reproduces,
    resolve_path,
)
from pipeline.envsimbench.reference import score_reference


def _canon(value: Any) -> str:
    return canonical_json(canonicalize(value))


def _observation(value: Any) -> Any:
    """:func:`parse_observation`, except that a string nested too deep to parse safely stays text."""
    if not isinstance(value, str) or too_deep(value):
        return value
    try:
        parsed = parse_observation(value)
    except RecursionError:  # nesting hidden from the bracket scan by closers inside strings
        return value
    return value if value_depth(parsed) > MAX_DEPTH else parsed


def feedback_match(predicted: Any, raw_observation: str) -> bool:
    """Exact FM: both sides parsed (JSON, then Python literal), compared as canonical JSON."""
    return _canon(plain(canonicalize(_observation(predicted)))) == _canon(
        plain(canonicalize(_observation(raw_observation)))
    )


def config_match(state_before: Any, state_after: Any, changes: Any) -> tuple[bool, str | None]:
    """Exact CM: ``(match, why the changes do not apply)``."""
    return reproduces(plain(state_before), plain(state_after), changes)


def _lenient_apply(state: Any, changes: Any) -> Any:
    """Apply what can be applied; a change that does not fit is skipped (not an error)."""
    result = json_copy(state)
    for change in changes if isinstance(changes, list) else []:
        if not isinstance(change, dict) or not isinstance(change.get("type"), str):
            continue
        if path_parts(change.get("path")) > MAX_PATH_PARTS:
            continue
        kind = CHANGE_TYPES.get(change["type"], "modify")
        try:
            path = resolve_path(result, change.get("path"), kind)
        except ChangeError:
            continue
        if not path:
            continue
        parent = result
        for key in path[:-1]:
            if isinstance(parent, dict):
                parent = parent.setdefault(str(key), {})
            elif (
                isinstance(parent, list)
                and isinstance(key, (int, str))
                and str(key).isdigit()
                and int(key) < len(parent)
            ):
                parent = parent[int(key)]
            else:  # a scalar, or no such list position: the change does not fit
                break
        if not isinstance(parent, dict):
            continue
        if kind == "delete":
            parent.pop(str(path[-1]), None)
        else:
            parent[str(path[-1])] = copy.deepcopy(change_value(change)[1])
    return result


def _get(state: Any, path: list[str]) -> Any:
    for key in path:
        if not isinstance(state, dict) or key not in state:
            return None
        state = state[key]
    return state


def config_match_changed_paths(
    state_before: Any, state_after: Any, true_delta: list[dict[str, Any]], changes: Any
) -> bool:
    """``cm_changed_paths``: the exact true value at every truly changed path (see module docstring)."""
    return _changed_paths_match(plain(state_before), plain(state_after), true_delta, changes)


def _changed_paths_match(before: Any, after: Any, true_delta: list[dict[str, Any]], changes: Any) -> bool:
    """:func:`config_match_changed_paths` of plain states (``before`` is not changed)."""
    predicted = _lenient_apply(before, changes)
    for rec in true_delta:
        path = list(rec["path"])
        if _canon(_get(predicted, path)) != _canon(_get(after, path)):
            return False
    return True


@dataclass(frozen=True)
class Score:
    fm: bool
    cm: bool
    cm_changed_paths: bool
    change_error: str | None = None
    cm_reference: bool = False
    fm_reference: bool = False
    reference_error: str | None = None


def score(sample: dict[str, Any], answer: dict[str, Any] | None, text: str | None = None) -> Score:
    """Score one answer against a benchmark sample.

    ``answer`` is the parsed answer (:func:`pipeline.evaluate.parsing.parse_answer`; None when it
    did not parse: 0 on our metrics). ``text`` is the raw answer text, which the reference metrics
    parse their own way; without it they score the parsed answer's JSON."""
    # the states parsed once from their stored text, plain, and never changed below (each use copies what it changes)
    before_text, after_text = plain_text(sample["state_before_json"]), plain_text(sample["state_after_json"])
    before, after = json.loads(before_text), json.loads(after_text)
    if text is None and answer is not None:
        text = json.dumps(answer, ensure_ascii=False)
    ref = score_reference(text, before, after, sample["raw_observation"]) if text is not None else None
    ref_fields = (
        {"cm_reference": ref.cm, "fm_reference": ref.fm, "reference_error": ref.error}
        if ref
        else {"reference_error": "no answer"}
    )
    if answer is None:
        return Score(False, False, False, "unparseable answer", **ref_fields)
    changes = answer.get("config_changes", [])
    delta = [{"op": d["op"], "path": list(d["path"])} for d in sample["delta"]]
    cm, error = reproduces(before, after, changes, non_finite_free(before_text, after_text, json.dumps(changes)))
    return Score(
        fm=feedback_match(answer.get("feedback"), sample["raw_observation"]),
        cm=cm,
        cm_changed_paths=_changed_paths_match(before, after, delta, changes),
        change_error=error,
        **ref_fields,
    )
