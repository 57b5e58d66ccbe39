"""State delta Δ = diff(s_t, s'_t) and its inverse ``apply`` (DESIGN §4.2).

Δ is a list of records ``{"op", "path", "before", "after"}`` over canonical states:

* dicts present on both sides are recursed into;
* a key only in ``s'_t`` is one ``add``; a key only in ``s_t`` is one ``remove``;
* any other differing value (scalar, list, type change) is one ``replace``.

``path`` is a list of dict keys, so keys containing dots stay unambiguous; ``display_path``
gives the dotted form for humans only. ``|Δ|`` is ``len(Δ)``.
"""

from __future__ import annotations

import copy
from typing import Any, Iterable, TypedDict


class DeltaRecord(TypedDict):
    op: str  # "add" | "remove" | "replace"
    path: list[str]
    before: Any
    after: Any


ADD, REMOVE, REPLACE = "add", "remove", "replace"


def diff(before: Any, after: Any) -> list[DeltaRecord]:
    """Return Δ between two canonical states, in deterministic (sorted-key) order."""
    out: list[DeltaRecord] = []
    _diff(before, after, [], out)
    return out


def _same(a: Any, b: Any) -> bool:
    # bool/int/float compare equal across types in Python (True == 1 == 1.0); JSON must not.
    return type(a) is type(b) and a == b


def _diff(a: Any, b: Any, path: list[str], out: list[DeltaRecord]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(a.keys() | b.keys()):
            if key not in b:
                out.append({"op": REMOVE, "path": path + [key], "before": a[key], "after": None})
            elif key not in a:
                out.append({"op": ADD, "path": path + [key], "before": None, "after": b[key]})
            else:
                _diff(a[key], b[key], path + [key], out)
        return
    if not _deep_equal(a, b):
        out.append({"op": REPLACE, "path": path, "before": a, "after": b})


def _deep_equal(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_deep_equal(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_deep_equal(x, y) for x, y in zip(a, b))
    return _same(a, b)


def apply(delta: Iterable[DeltaRecord], state: Any) -> Any:
    """Apply Δ to a copy of ``state`` and return the result; raises ``DeltaError`` on mismatch."""
    result = copy.deepcopy(state)
    for rec in delta:
        result = _apply_one(result, rec)
    return result


class DeltaError(ValueError):
    """Δ does not fit the state it is applied to."""


def _apply_one(state: Any, rec: DeltaRecord) -> Any:
    path, op = list(rec["path"]), rec["op"]
    if not path:
        if op != REPLACE:
            raise DeltaError(f"{op} with an empty path")
        return copy.deepcopy(rec["after"])
    parent = state
    for i, key in enumerate(path[:-1]):
        if not isinstance(parent, dict) or key not in parent:
            raise DeltaError(f"path {display_path(path[: i + 1])} not found for {op}")
        parent = parent[key]
    if not isinstance(parent, dict):
        raise DeltaError(f"parent of {display_path(path)} is not an object")
    key = path[-1]
    if op == ADD:
        if key in parent:
            raise DeltaError(f"add: {display_path(path)} already exists")
        parent[key] = copy.deepcopy(rec["after"])
    elif op == REMOVE:
        if key not in parent:
            raise DeltaError(f"remove: {display_path(path)} not found")
        del parent[key]
    elif op == REPLACE:
        if key not in parent:
            raise DeltaError(f"replace: {display_path(path)} not found")
        parent[key] = copy.deepcopy(rec["after"])
    else:
        raise DeltaError(f"unknown op {op!r}")
    return state


def display_path(path: list[str]) -> str:
    """Dotted display form of a path (ambiguous when keys contain dots — never parse it back)."""
    return ".".join(path)
