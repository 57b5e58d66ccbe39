"""Safe parsing of call strings such as ``mv(source='a', destination='b')``.

Ground-truth actions are data: they are parsed with :mod:`ast` and their arguments evaluated
with :func:`ast.literal_eval` only — never ``eval``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any


class CallParseError(ValueError):
    """A call string that is not a single literal-argument function call."""


@dataclass(frozen=True)
class ParsedCall:
    name: str
    args: list[Any]
    kwargs: dict[str, Any]


def parse_call(text: str) -> ParsedCall:
    """Parse ``name(arg, key=value, ...)`` with literal arguments."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise CallParseError(f"syntax error in call {text!r}: {exc.msg} (col {exc.offset})") from None
    node = tree.body
    if not isinstance(node, ast.Call):
        raise CallParseError(f"not a function call: {text!r}")
    if not isinstance(node.func, ast.Name):
        raise CallParseError(f"call target must be a plain tool name: {text!r}")
    args: list[Any] = []
    for arg in node.args:
        if isinstance(arg, ast.Starred):
            raise CallParseError(f"star-arguments are not allowed: {text!r}")
        args.append(_literal(arg, text))
    kwargs: dict[str, Any] = {}
    for kw in node.keywords:
        if kw.arg is None:
            raise CallParseError(f"**kwargs are not allowed: {text!r}")
        if kw.arg in kwargs:
            raise CallParseError(f"argument {kw.arg!r} given twice: {text!r}")
        kwargs[kw.arg] = _literal(kw.value, text)
    return ParsedCall(node.func.id, args, kwargs)


def _literal(node: ast.AST, text: str) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise CallParseError(f"argument {ast.unparse(node)!r} is not a literal in {text!r}") from None
