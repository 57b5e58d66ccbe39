"""What the EnvSimBench evaluation *code* computes — ``cm_reference`` and ``fm_reference`` — reproduced
quirk for quirk, so our numbers can be compared with published tables. Written from the documented
behaviour of the reference script (docs/definitions.md §6), not copied from it.

Each quirk, and the test case that pins it (``tests/envsimbench/test_reference_metrics.py``):

1. **Answer extraction.** ``<think>…</think>`` (and an unclosed ``<think>…``) is dropped; the text is cut
   at the first of the separators ``\\tNdrFc``, ``{EIF{``, ``EIF{`` (tried in that order); the first
   fenced block is tried (first balanced ``{…}`` in it, then the whole block as JSON — which may be a
   non-object); then the first balanced ``{…}`` of the text that parses as JSON (trailing commas
   removed as a fallback; quotes are tracked only for ``"``); then ``json_repair``; a Python-literal
   answer like ``{'feedback': …}`` is therefore read by ``json_repair``.
2. **Paths** are split on ``"."``: a key that contains a dot can never match (the true path is
   split too), list indices are allowed in predicted paths, missing intermediate keys are created,
   list positions beyond the end are filled with ``{}`` (intermediate) or ``None`` (last).
3. **Change types**: ``delete`` / ``removed`` remove; *every other type* (``add``, ``modify``,
   ``rename``, none at all) sets the value, taken from ``value`` or else ``after``.
4. **Only truly changed paths are checked** (the reference's own diff of ``config_before`` /
   ``config_after``, whose "changed" is Python ``!=``): spurious predicted changes are never
   penalised, so every parseable answer scores 1 on a sample with no change.
5. **Python ``==``** compares values: ``1 == 1.0 == True``, so ints written as floats pass; a change
   from ``1`` to ``1.0`` is no change at all.
6. **A removed path must still exist with the value ``None``** in the prediction: a correct delete
   fails, setting the key to null passes.
7. **FM** compares the two feedbacks after the reference's parse (objects as they are, strings
   through the same extraction, then ``ast.literal_eval``, then unquoting); with the reference's
   pinned ``json_repair`` (0.59.4) a Python ``None`` inside a repaired dict becomes ``'None'``, so a
   feedback given as a JSON object with ``null`` does not match a Python-repr observation.
8. Where the reference script *raises* on an answer (``config_changes`` not a list of objects, an
   answer that is a JSON list, an unhashable path element) it drops the sample from its totals; a
   per-sample score cannot do that, so we score it 0 and say why in ``reference_error``. Positions
   that would make the reference allocate without bound (an index beyond ``MAX_INDEX_GROWTH``, a path
   of more than ``MAX_PATH_PARTS`` parts, each of which would create a nested object) are treated the
   same way, and so is an answer nested deeper than ``MAX_DEPTH`` levels (where the script would hit
   Python's recursion limit): never a ``RecursionError`` here (:mod:`pipeline.core.bounds`). The script
   loops over ``config_changes`` calling ``.get`` on each item, so an *empty* string or object there
   raises nothing: it is no change (``json_repair`` gives ``""`` for an answer cut just after
   ``"config_changes":``, which then scores FM on its feedback and CM as an empty prediction).
"""

from __future__ import annotations

import ast
import copy
import json
import re
from dataclasses import dataclass
from typing import Any

from json_repair import repair_json

from pipeline.core.bounds import MAX_DEPTH, MAX_PATH_PARTS, too_deep, value_depth
from pipeline.core.protocol import json_copy

MAX_INDEX_GROWTH = 100_000
_THINK = re.compile(r"<think>[\s\S]*?</think>", re.IGNORECASE)
_THINK_OPEN = re.compile(r"<think>[\s\S]*$", re.IGNORECASE)
_SEPARATORS = (re.compile(r"\tNdrFc"), re.compile(r"\{EIF\{"), re.compile(r"EIF\{"))
_FENCE = re.compile(r"```(?:json)?\s*([\s\S]*?)```", re.IGNORECASE)
_TRAILING_COMMA_OBJ = re.compile(r",\s*}")
_TRAILING_COMMA_ARR = re.compile(r",\s*]")
_MISSING = object()
_SIGNIFICANT = re.compile(r'[{}"\\]')  # what _first_object's scan looks at


class ReferenceCrash(Exception):
    """The reference script raises on this answer (it drops the sample; we score 0)."""


def _first_object(text: str) -> Any:
    """The first balanced ``{…}`` of ``text`` that parses as JSON (trailing commas dropped as a retry). The scan
    visits only the characters that matter (braces, quotes, backslashes), found by a regular expression: a long
    answer of prose costs what a C scan of it costs."""
    depth, start, in_string, escaped, after = 0, None, False, False, -1
    for match in _SIGNIFICANT.finditer(text):
        i, ch = match.start(), match.group()
        if escaped and i == after:  # the character right after a backslash inside a string
            escaped = False
            continue
        escaped = False
        if ch == "\\" and in_string:
            escaped, after = True, i + 1
        elif ch == '"':
            in_string = not in_string
        elif in_string:
            pass
        elif ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth > 0:
            depth -= 1
            if depth == 0 and start is not None:
                candidate = text[start : i + 1]
                for attempt in (candidate, _TRAILING_COMMA_ARR.sub("]", _TRAILING_COMMA_OBJ.sub("}", candidate))):
                    try:
                        return json.loads(attempt)
                    except (ValueError, RecursionError):
                        pass
                start = None
    return None


def extract_json(text: Any) -> Any:
    """The reference's extraction of a JSON value from a model's text (quirk 1); None if none."""
    if not isinstance(text, str) or too_deep(text):
        return None
    found = _extract(text)
    return None if value_depth(found) > MAX_DEPTH else found


def _extract(text: str) -> Any:
    text = _THINK_OPEN.sub("", _THINK.sub("", text))
    for sep in _SEPARATORS:
        if m := sep.search(text):
            text = text[: m.start()]
            break
    if fence := _FENCE.search(text):
        block = fence.group(1).strip()
        if (found := _first_object(block)) is not None:
            return found
        try:
            return json.loads(block)
        except (ValueError, RecursionError):
            pass
    if (found := _first_object(text)) is not None:
        return found
    if "{" not in text:  # json_repair makes an object only from a brace: what it returns here is no object
        return None
    try:
        repaired = repair_json(text, return_objects=True)
    except Exception:  # the reference falls through to plain parsing on any repair error
        pass
    else:
        if isinstance(repaired, list) and len(repaired) == 1:  # one object in a list: that object
            repaired = repaired[0]
        return repaired if isinstance(repaired, dict) else None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        pass
    try:
        return ast.literal_eval(text)
    except Exception:
        return None


def _literal(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except Exception:  # anything literal_eval raises means "not a literal"
        return _MISSING


def parse_value(value: Any) -> Any:
    """The reference's parse of a feedback / observation before comparing (quirk 7): the text, then
    the text inside one pair of quotes, each tried as JSON (extraction) and as a Python literal."""
    if not isinstance(value, str):
        return value
    texts = [value]
    s = value.strip()
    if len(s) >= 2 and s[0] == s[-1] and s[0] in "\"'":
        texts.append(s[1:-1])
    for text in texts:
        if (obj := extract_json(text)) is not None or (obj := _literal(text)) is not _MISSING:
            return obj
    return value


def reference_diff(before: Any, after: Any, prefix: str = "") -> list[dict[str, Any]]:
    """The reference's diff: ``{path: "a.b", type: added|removed|modified, before, after}`` records,
    recursing into dicts on both sides, "changed" meaning Python ``!=`` (quirk 5). This is also the
    ``config_change.changes`` the reference format stores."""
    before = before or {}
    after = after or {}
    keys = {*(before if isinstance(before, dict) else ()), *(after if isinstance(after, dict) else ())}
    changes: list[dict[str, Any]] = []
    for key in sorted(keys):
        path = f"{prefix}.{key}" if prefix else key
        b = before.get(key) if isinstance(before, dict) else None
        a = after.get(key) if isinstance(after, dict) else None
        if key not in before:
            changes.append({"path": path, "type": "added", "before": None, "after": a})
        elif key not in after:
            changes.append({"path": path, "type": "removed", "before": b, "after": None})
        elif isinstance(b, dict) and isinstance(a, dict):
            changes.extend(reference_diff(b, a, path))
        elif b != a:
            changes.append({"path": path, "type": "modified", "before": b, "after": a})
    return changes


def _grow(seq: list[Any], idx: int, filler: Any) -> None:
    if idx - len(seq) > MAX_INDEX_GROWTH:
        raise ReferenceCrash(f"list position {idx} would make the reference allocate {idx - len(seq)} entries")
    while idx >= len(seq):
        seq.append(copy.copy(filler))


def _slot(container: Any, part: Any, filler: Any = _MISSING) -> Any:
    """The key ``part`` addresses in ``container`` the reference's way (quirk 2): a dict key as it is,
    a list position as an ``int`` (the list grown with copies of ``filler`` up to it, unless
    ``filler`` is left out); ``_MISSING`` where it addresses nothing (the change is ignored)."""
    if isinstance(container, dict):
        return part
    if isinstance(container, list):
        try:
            idx = int(part)
        except (TypeError, ValueError):
            return _MISSING
        if filler is not _MISSING:
            _grow(container, idx, filler)
        return idx
    return _MISSING


def _apply_one(state: Any, path: Any, value: Any, kind: Any) -> None:
    """One predicted change the way the reference applies it (quirks 2, 3); silently ignored when it
    does not fit, as there."""
    if not path:
        return
    parts = list(path) if isinstance(path, list) else path.split(".") if isinstance(path, str) else [str(path)]
    if len(parts) > MAX_PATH_PARTS:
        raise ReferenceCrash(f"path of {len(parts)} parts would make the reference nest {len(parts)} objects")
    cur = state
    try:
        for part in parts[:-1]:  # missing intermediate keys are created, short lists grown
            key = _slot(cur, part, {})
            if key is _MISSING:
                return
            if isinstance(cur, dict) and key not in cur:
                cur[key] = {}
            cur = cur[key]
        if kind in ("delete", "removed"):
            key = _slot(cur, parts[-1])
            if isinstance(cur, dict):
                cur.pop(key, None)
            elif key is not _MISSING and 0 <= key < len(cur):
                cur.pop(key)
            return
        if (key := _slot(cur, parts[-1], None)) is not _MISSING:
            cur[key] = value
    except ReferenceCrash:
        raise
    except Exception as exc:  # unhashable keys, negative positions past the start: the script raises
        raise ReferenceCrash(f"applying path {path!r} raises {type(exc).__name__}") from None


def reference_apply(state: Any, changes: Any) -> Any:
    """The predicted config: the changes applied to a copy of ``state`` as the reference does (quirk 8: the
    script loops over ``config_changes`` calling ``.get`` on each item, so an empty string or object is no
    change at all, and anything else that is not a list of objects raises)."""
    if isinstance(changes, (str, dict)) and not changes:
        changes = []
    if not isinstance(changes, list) or not all(isinstance(ch, dict) for ch in changes):
        raise ReferenceCrash("config_changes is not a list of objects")
    predicted = json_copy(state)
    for ch in changes:
        _apply_one(predicted, ch.get("path"), ch.get("value") if "value" in ch else ch.get("after"), ch.get("type"))
    return predicted


def cm_reference(before: Any, after: Any, changes: Any) -> bool:
    """Config Match as the reference code computes it (quirks 2–6); raises :class:`ReferenceCrash`."""
    predicted = reference_apply(before or {}, changes)
    for change in reference_diff(before or {}, after or {}):
        cur = predicted
        for key in str(change["path"]).split("."):
            if isinstance(cur, dict) and key in cur:
                cur = cur[key]
            else:
                return False
        if cur != change["after"]:
            return False
    return True


def fm_reference(predicted_feedback: Any, observation_content: Any) -> bool:
    """Feedback Match as the reference code computes it (quirk 7)."""
    return parse_value(predicted_feedback) == parse_value(observation_content)


@dataclass(frozen=True)
class ReferenceScore:
    fm: bool
    cm: bool
    error: str | None = None


def score_reference(text: str | None, before: Any, after: Any, observation_content: Any) -> ReferenceScore:
    """Both reference metrics of one raw answer text against the reference-format sample values
    (plain ``config_before`` / ``config_after`` and ``observation.content``)."""
    if isinstance(text, str) and too_deep(text):
        return ReferenceScore(
            False,
            False,
            f"the answer is nested deeper than {MAX_DEPTH} levels (the script would hit Python's recursion limit)",
        )
    parsed = extract_json(text)
    if parsed is None:
        return ReferenceScore(False, False, "the reference finds no JSON in the answer")
    if not isinstance(parsed, dict):
        return ReferenceScore(
            False, False, f"the reference script raises: the answer is a JSON {type(parsed).__name__}"
        )
    try:
        cm = cm_reference(before, after, parsed.get("config_changes", []))
    except ReferenceCrash as exc:
        return ReferenceScore(False, False, f"the reference script raises: {exc}")
    return ReferenceScore(fm_reference(parsed.get("feedback"), observation_content), cm)
