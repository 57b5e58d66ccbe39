"""JSON Schema as the exploration policy reads it: references resolved, a value checked against a schema, and
strings drawn for ``format`` and ``pattern`` (docs/environments.md, "Exploration").

Only the keywords a tool schema uses are read: ``$ref``, ``allOf``, ``enum``, ``const``, ``type``, ``anyOf``/``oneOf``,
object, array, number and string bounds, ``pattern`` and ``format`` (``date``, ``date-time``, ``email``).
jsonschema validates but does not draw, and hypothesis-jsonschema would draw from its own randomness, not the
episode's seed; this runs in the sandbox child on the stdlib alone.
"""

from __future__ import annotations

import datetime
import random
import re
from collections.abc import Callable
from contextlib import suppress
from typing import Any

#: how deep references are followed (a recursive model stops there: ``null``)
MAX_REF_DEPTH = 6
_CONTAINERS = ("properties", "$defs", "definitions")
_LISTS = ("anyOf", "oneOf", "allOf")


def _mentions_ref(node: Any) -> bool:
    if isinstance(node, dict):
        return "$ref" in node or "allOf" in node or any(_mentions_ref(v) for v in node.values())
    if isinstance(node, list):
        return any(_mentions_ref(v) for v in node)
    return False


def resolved(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with every local ``$ref`` replaced by what it points to and every ``allOf`` merged (its
    ``$defs``/``definitions`` dropped); the same object when it has neither."""
    if not isinstance(schema, dict) or not _mentions_ref(schema):
        return schema
    out = _resolve(schema, schema, 0)
    return {k: v for k, v in out.items() if k not in ("$defs", "definitions")}


def _pointer(root: dict[str, Any], ref: str) -> Any:
    """What a local reference (``#/$defs/Name``) points to; None when it is not local or not found."""
    if not ref.startswith("#"):
        return None
    node: Any = root
    for part in [p for p in ref[1:].split("/") if p]:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def _resolve(node: Any, root: dict[str, Any], depth: int) -> Any:
    if isinstance(node, list):
        return [_resolve(v, root, depth) for v in node]
    if not isinstance(node, dict):
        return node
    if isinstance(node.get("$ref"), str):
        if depth >= MAX_REF_DEPTH:  # a recursive model ends here: null (its optional links end the recursion)
            return {"type": "null"}
        target = _pointer(root, node["$ref"])
        rest = {k: v for k, v in node.items() if k != "$ref"}
        base = _resolve(target, root, depth + 1) if isinstance(target, dict) else {}
        return {**base, **_resolve(rest, root, depth)}
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _CONTAINERS and isinstance(value, dict):
            out[key] = {k: _resolve(v, root, depth) for k, v in value.items()} if key == "properties" else value
        elif key in ("items", "additionalProperties", "not") or key in _LISTS:
            out[key] = _resolve(value, root, depth)
        else:
            out[key] = value
    if isinstance(out.get("allOf"), list):
        for part in [p for p in out.pop("allOf") if isinstance(p, dict)]:
            out = _merge(out, part)
    return out


def _merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Both schemas at once: properties and required united, the rest of ``a`` kept over ``b``'s."""
    out = {**b, **a}
    if "properties" in a or "properties" in b:
        out["properties"] = {**(b.get("properties") or {}), **(a.get("properties") or {})}
    if "required" in a or "required" in b:
        out["required"] = list(dict.fromkeys([*(a.get("required") or []), *(b.get("required") or [])]))
    return out


# -- conformance -------------------------------------------------------------------------------------------

_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


#: each JSON Schema ``type``'s test of a value
_TYPE_CHECKS: dict[str, Callable[[Any], bool]] = {
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
    "null": lambda v: v is None,
}


def is_type(value: Any, kind: Any) -> bool:
    """Whether ``value`` is of the JSON Schema ``type`` (a union too; an unknown type: yes)."""
    if isinstance(kind, list):
        return any(is_type(value, k) for k in kind)
    check = _TYPE_CHECKS.get(kind) if isinstance(kind, str) else None
    return True if check is None else check(value)


def format_ok(value: str, fmt: Any) -> bool:
    """Whether a string has the ``format`` (``date``, ``date-time``, ``email``; any other: yes)."""
    try:
        if fmt == "date":
            datetime.date.fromisoformat(value)
            return len(value) == 10
        if fmt == "date-time":
            parsed = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
            return "T" in value.upper() and parsed.tzinfo is not None
    except ValueError:
        return False
    if fmt == "email":
        return bool(_EMAIL.match(value))
    return True


def _string_ok(value: str, schema: dict[str, Any]) -> bool:
    if isinstance(schema.get("minLength"), int) and len(value) < schema["minLength"]:
        return False
    if isinstance(schema.get("maxLength"), int) and len(value) > schema["maxLength"]:
        return False
    if isinstance(schema.get("pattern"), str):
        with suppress(re.error):
            if re.search(schema["pattern"], value) is None:
                return False
    return format_ok(value, schema.get("format"))


def _number_ok(value: float, schema: dict[str, Any]) -> bool:
    bounds = (
        ("minimum", lambda b: value >= b),
        ("maximum", lambda b: value <= b),
        ("exclusiveMinimum", lambda b: value > b),
        ("exclusiveMaximum", lambda b: value < b),
    )
    return all(test(schema[key]) for key, test in bounds if numeric(schema.get(key)))


def numeric(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _array_ok(value: list[Any], schema: dict[str, Any]) -> bool:
    if isinstance(schema.get("minItems"), int) and len(value) < schema["minItems"]:
        return False
    if isinstance(schema.get("maxItems"), int) and len(value) > schema["maxItems"]:
        return False
    if schema.get("uniqueItems") is True and len({repr(v) for v in value}) < len(value):
        return False
    items = schema.get("items")
    return not isinstance(items, dict) or all(conforms(v, items) for v in value)


def _object_ok(value: dict[str, Any], schema: dict[str, Any]) -> bool:
    if any(name not in value for name in schema.get("required") or ()):
        return False
    props = schema.get("properties") or {}
    if schema.get("additionalProperties") is False and any(k not in props for k in value):
        return False
    return all(conforms(v, props[k]) for k, v in value.items() if isinstance(props.get(k), dict))


def conforms(value: Any, schema: Any) -> bool:
    """Whether ``value`` is valid under a resolved ``schema`` (the keywords of the module docstring)."""
    if not isinstance(schema, dict):
        return True
    if "const" in schema and value != schema["const"]:
        return False
    if isinstance(schema.get("enum"), list) and value not in schema["enum"]:
        return False
    if "type" in schema and not is_type(value, schema["type"]):
        return False
    for key in ("anyOf", "oneOf"):
        subs = [s for s in schema.get(key) or () if isinstance(s, dict)]
        if subs and not any(conforms(value, s) for s in subs):
            return False
    if isinstance(value, str):
        return _string_ok(value, schema)
    if numeric(value):
        return _number_ok(value, schema)
    if isinstance(value, list):
        return _array_ok(value, schema)
    if isinstance(value, dict):
        return _object_ok(value, schema)
    return True


# -- drawing strings ---------------------------------------------------------------------------------------


def format_string(fmt: Any, rng: random.Random) -> str | None:
    """A string of the ``format`` (None: a format not drawn here)."""
    if fmt == "date":
        return f"2025-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    if fmt == "date-time":
        return f"2025-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:00:00Z"
    if fmt == "email":
        return f"user{rng.randint(1, 999)}@example.com"
    return None


_PRINTABLE = [chr(c) for c in range(0x21, 0x7F)]
_CATEGORIES = {
    "CATEGORY_DIGIT": "0123456789",
    "CATEGORY_WORD": "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_",
    "CATEGORY_SPACE": " ",
}


def pattern_string(pattern: str, rng: random.Random, limit: int = 64) -> str | None:
    """A string that matches the regular expression ``pattern`` (drawn by walking its parse tree); None when it
    uses what is not drawn here (look-arounds, back references) or the draw does not match."""
    import re._parser as sre  # the standard library's own parser of patterns

    try:
        tree = sre.parse(pattern)
        text = "".join(_draw(list(tree), rng, limit))
    except (re.error, _Undrawable, RecursionError):
        return None
    return text if re.search(pattern, text) else None


class _Undrawable(Exception):
    """A pattern construct not drawn here."""


def _chars(items: list[Any]) -> list[str]:
    """The characters a class (``[...]``) allows."""
    out: list[str] = []
    negate = False
    for op, arg in items:
        name = str(op)
        if name == "NEGATE":
            negate = True
        elif name == "LITERAL":
            out.append(chr(arg))
        elif name == "RANGE":
            out.extend(chr(c) for c in range(arg[0], min(arg[1], arg[0] + 200) + 1))
        elif name == "CATEGORY":
            out.extend(_CATEGORIES.get(str(arg), ""))
    if negate:
        return [c for c in _PRINTABLE if c not in out]
    return out


def _draw(tree: list[Any], rng: random.Random, limit: int) -> list[str]:
    out: list[str] = []
    for op, arg in tree:
        name = str(op)
        if name == "LITERAL":
            out.append(chr(arg))
        elif name == "NOT_LITERAL":
            out.append(rng.choice([c for c in _PRINTABLE if c != chr(arg)]))
        elif name == "ANY":
            out.append(rng.choice(_PRINTABLE))
        elif name == "IN":
            choices = _chars(arg)
            if not choices:
                raise _Undrawable(name)
            out.append(rng.choice(choices))
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            lo, hi, sub = arg
            hi = min(hi, lo + 3, limit)
            for _ in range(rng.randint(lo, max(lo, hi))):
                out.extend(_draw(list(sub), rng, limit))
        elif name == "SUBPATTERN":
            out.extend(_draw(list(arg[-1]), rng, limit))
        elif name == "BRANCH":
            out.extend(_draw(list(rng.choice(arg[1])), rng, limit))
        elif name == "AT":
            continue
        else:
            raise _Undrawable(name)
    return out
