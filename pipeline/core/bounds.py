"""Depth and size bounds for everything an endpoint sends back, so that parsing and scoring never recurse without
bound: a value nested deeper than :data:`MAX_DEPTH` levels, or a change path of more than :data:`MAX_PATH_PARTS`
parts, is refused with a reason instead of a ``RecursionError`` somewhere below. :func:`too_deep` is a cheap,
conservative scan of the text; :func:`loads` parses and checks the depth of what it parsed."""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

#: deepest nesting of an answer / feedback value accepted (states are far shallower)
MAX_DEPTH = 100
#: most parts of a change path (a key list, or a dotted string's parts)
MAX_PATH_PARTS = 100

_BRACKETS = re.compile(r"[\[\]{}()]")
_OPEN = frozenset("[{(")


class TooDeep(ValueError):
    """A value nested deeper than the bound."""


def too_deep(text: str, limit: int = MAX_DEPTH) -> bool:
    """``text`` nests ``[`` / ``{`` / ``(`` deeper than ``limit`` (strings not skipped: an upper bound on what a JSON
    or Python-literal parse of any part of it would recurse into, up to closers inside strings)."""
    depth = 0
    for m in _BRACKETS.finditer(text):
        if m.group() in _OPEN:
            depth += 1
            if depth > limit:
                return True
        elif depth:
            depth -= 1
    return False


_NOT_JSON_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def json_too_deep(text: str, limit: int) -> bool:
    """A JSON text nests deeper than ``limit`` (a scalar is 0, ``[]`` is 1), decided before anything recurses into
    it: the bracket count, then the running depth over the brackets (an upper bound), then the exact check."""
    if text.count("[") + text.count("{") <= limit:
        return False
    if max(accumulate(map(_STEP.__getitem__, _NOT_JSON_BRACKET.sub("", text))), default=0) <= limit:
        return False
    try:
        value = json.loads(text)
    except RecursionError:
        return True
    except ValueError:
        return False  # not JSON: the caller's own parse says so
    return value_depth(value, limit) > limit


def value_depth(value: Any, stop: int = MAX_DEPTH) -> int:
    """Nesting depth of a parsed value (a scalar is 0, ``[]`` is 1), without recursion; stops past ``stop``."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, (list, tuple)):
            children = node
        else:
            continue
        level += 1
        if level > deepest:
            deepest = level
            if deepest > stop:
                return deepest
        stack.extend((child, level) for child in children)
    return deepest


def check_value(value: Any, what: str = "value", limit: int = MAX_DEPTH) -> Any:
    """``value`` itself, or :class:`TooDeep` naming ``what``."""
    if value_depth(value, limit) > limit:
        raise TooDeep(f"{what} is nested deeper than {limit} levels")
    return value


def loads(text: str | bytes, what: str = "value", limit: int = MAX_DEPTH) -> Any:
    """``json.loads`` bounded in depth: :class:`TooDeep` (a ``ValueError``) instead of a
    ``RecursionError`` or a value deeper than ``limit``; other errors as ``json.loads`` raises them."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8")
    try:
        value = json.loads(text)
    except RecursionError:
        raise TooDeep(f"{what} is nested deeper than {limit} levels") from None
    return check_value(value, what, limit)


def path_parts(path: Any) -> int:
    """How many parts a change path has (a list's length, a dotted string's parts, else 1)."""
    if isinstance(path, list):
        return len(path)
    if isinstance(path, str):
        return path.count(".") + 1
    return 1


def long_path(changes: Any, limit: int = MAX_PATH_PARTS) -> str | None:
    """Why ``changes`` has a path too long to apply (the first such change), or None."""
    for i, change in enumerate(changes if isinstance(changes, list) else []):
        if isinstance(change, dict) and path_parts(change.get("path")) > limit:
            return f"change {i}: path of {path_parts(change.get('path'))} parts is longer than {limit}"
    return None
