"""Outcome and argument count of a step (docs/definitions.md §4.3)."""

from __future__ import annotations

from typing import Any, Mapping

SUCCESS, FAILURE, ERROR = "success", "failure", "error"
OUTCOMES = (SUCCESS, FAILURE, ERROR)


def args_count(arguments: Mapping[str, Any]) -> int:
    """Number of top-level arguments of an action."""
    return len(arguments)


def is_error_text(value: Any) -> bool:
    return isinstance(value, str) and value.lstrip().lower().startswith("error")


def reports_failure(tool: str, value: Any) -> bool:
    """Whether a return value carries a failure signal in the style bfcl/EnvScaler tools use.

    * a dict with an ``error`` key (or ``success: False``);
    * a dict with a false ``*_status`` field — except for read-only status queries
      (``get_login_status`` answers False without failing);
    * a non-empty list made only of error dicts / ``Error…`` strings;
    * a string starting with ``Error``.
    """
    if isinstance(value, dict):
        if "error" in value:
            return True
        if value.get("success") is False:
            return True
        if "get_" not in tool and any(
            k.endswith("_status") and v is False for k, v in value.items() if isinstance(k, str)
        ):
            return True
        return False
    if isinstance(value, list) and value:
        return all((isinstance(v, dict) and "error" in v) or is_error_text(v) for v in value)
    return is_error_text(value)
