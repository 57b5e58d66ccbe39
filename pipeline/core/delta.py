"""State delta Δ = diff(s_t, s'_t) and its inverse ``apply`` (docs/definitions.md §4.2): records ``{"op", "path",
"before", "after"}``, recursing into dicts on both sides; a key only in ``s'_t`` is an ``add``, only in ``s_t`` a
``remove``, any other differing value a ``replace``. ``path`` is a list of keys; ``|Δ|`` is ``len(Δ)``.
"""

from __future__ import annotations

import marshal
from collections.abc import Iterable
from contextlib import suppress
from typing import Any, TypedDict

from pipeline.core.canonical import canonical_json


class DeltaRecord(TypedDict):
    op: str  # "add" | "remove" | "replace"
    path: list[str]
    before: Any
    after: Any


ADD, REMOVE, REPLACE = "add", "remove", "replace"


class DeltaTooLarge(ValueError):
    """Δ has more records than the limit it was computed under (``records``: how many were found by then)."""

    def __init__(self, records: int, limit: int) -> None:
        super().__init__(f"Δ has more than {limit} records")
        self.records, self.limit = records, limit


def diff(before: Any, after: Any, limit: int | None = None) -> list[DeltaRecord]:
    """Return Δ between two canonical states, in deterministic (sorted-key) order; past ``limit`` records it
    stops and raises :class:`DeltaTooLarge` (the work and memory of a Δ stay bounded by the limit)."""
    out: list[DeltaRecord] = []
    _diff(before, after, [], out, limit if limit is not None else -1)
    return out


def _strict_same(a: Any, b: Any) -> bool:
    """Equal as canonical JSON (``1``, ``1.0`` and ``true`` differ): Python's ``==`` first (C speed), then their
    ``marshal`` bytes (which spell each value's type; 8× cheaper than the texts), then the texts."""
    if a is b:
        return True
    try:
        if a != b:
            return False
        with suppress(ValueError):  # not marshallable (too deep): the texts decide
            if marshal.dumps(a, 2) == marshal.dumps(b, 2):
                return True
        return canonical_json(a) == canonical_json(b)
    except (TypeError, ValueError, RecursionError):
        return _deep_equal(a, b)


def _diff(a: Any, b: Any, path: list[str], out: list[DeltaRecord], limit: int) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        if _strict_same(a, b):  # an unchanged subtree: nothing to walk
            return
        for key in sorted(a.keys() | b.keys()):
            if key not in b:
                out.append({"op": REMOVE, "path": path + [key], "before": a[key], "after": None})
            elif key not in a:
                out.append({"op": ADD, "path": path + [key], "before": None, "after": b[key]})
            else:
                _diff(a[key], b[key], path + [key], out, limit)
            if 0 <= limit < len(out):
                raise DeltaTooLarge(len(out), limit)
        return
    if not _strict_same(a, b):
        out.append({"op": REPLACE, "path": path, "before": a, "after": b})


def _deep_equal(a: Any, b: Any) -> bool:
    if type(a) is not type(b):  # bool/int/float compare equal across types in Python (True == 1 == 1.0); JSON must not
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_deep_equal(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_deep_equal(x, y) for x, y in zip(a, b))
    return a == b


def apply(delta: Iterable[DeltaRecord], state: Any) -> Any:
    """Apply Δ to ``state`` (never modified) and return the new state; raises ``DeltaError`` on mismatch. The
    result shares every untouched subtree with ``state`` (only dicts on changed paths are copied), so a replay
    step costs O(|Δ| · depth); treat both as immutable afterwards."""
    result = state
    copied: set[int] = set()  # ids of dicts already copied for this Δ (safe to change in place)
    for rec in delta:
        result = _apply_one(result, rec, copied)
    return result


class DeltaError(ValueError):
    """Δ does not fit the state it is applied to."""


def _own(value: dict[str, Any], copied: set[int]) -> dict[str, Any]:
    if id(value) in copied:
        return value
    mine = dict(value)
    copied.add(id(mine))
    return mine


def _apply_one(state: Any, rec: DeltaRecord, copied: set[int]) -> Any:
    path, op = list(rec["path"]), rec["op"]
    if not path:
        if op != REPLACE:
            raise DeltaError(f"{op} with an empty path")
        return rec["after"]
    if not isinstance(state, dict):
        raise DeltaError(f"path {display_path(path[:1])} not found for {op}")
    root = parent = _own(state, copied)
    for i, key in enumerate(path[:-1]):
        child = parent.get(key) if isinstance(parent, dict) else None
        if not isinstance(child, dict):
            if key in parent and i == len(path) - 2:
                raise DeltaError(f"parent of {display_path(path)} is not an object")
            raise DeltaError(f"path {display_path(path[: i + 1])} not found for {op}")
        child = _own(child, copied)
        parent[key] = child
        parent = child
    key = path[-1]
    if op not in (ADD, REMOVE, REPLACE):
        raise DeltaError(f"unknown op {op!r}")
    if (key in parent) == (op == ADD):  # an add needs a new key, a remove or replace an existing one
        raise DeltaError(f"{op}: {display_path(path)} {'already exists' if op == ADD else 'not found'}")
    if op == REMOVE:
        del parent[key]
    else:
        parent[key] = rec["after"]
    return root


def display_path(path: list[str]) -> str:
    """Dotted display form of a path (ambiguous when keys contain dots — never parse it back)."""
    return ".".join(path)
