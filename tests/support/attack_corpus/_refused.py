"""Shared ``check`` for the issue-40 cases: every attempt the attacker reports must have been refused."""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any


def all_refused(results: list[dict[str, Any]], _limits: Any) -> list[str]:
    """Each attacker tool returns ``{"success": True, "data": {attempt: outcome}}``; an outcome that is not a
    refusal (an exception name) is an escape."""
    out = []
    for result in results:
        for step in result["steps"]:
            if step["outcome"] == "error":
                continue
            try:
                data = ast.literal_eval(step["raw_observation"])["data"]
            except (ValueError, SyntaxError, KeyError, TypeError):
                out.append(f"unreadable observation {step['raw_observation'][:200]!r}")
                continue
            for attempt, outcome in data.items():
                if not (isinstance(outcome, str) and outcome.endswith(("Error", "refused"))):
                    out.append(f"{step['tool']}: {attempt} was not refused: {str(outcome)[:200]}")
    return out


def refused_except(allowed: set[str]) -> Callable[[list[dict[str, Any]], Any], list[str]]:
    """:func:`all_refused`, except the attempts in ``allowed`` (the sandbox lets ordinary code do them)."""

    def check(results: list[dict[str, Any]], limits: Any) -> list[str]:
        out = []
        for escape in all_refused(results, limits):
            attempt = escape.split(": ", 1)[1].split(" was not refused", 1)[0] if " was not refused" in escape else ""
            if attempt not in allowed:
                out.append(escape)
        return out

    return check
