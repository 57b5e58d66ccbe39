"""Tolerant parsing of a simulator's answer: ``<think>`` blocks dropped, fenced JSON, leading/trailing prose, one
object. The changes inside may be in our format or the reference's (dotted paths, added / modified / removed,
``after``): :func:`pipeline.core.protocol.apply_changes` reads both.

Bounded: an answer that is not a string, longer than :data:`MAX_ANSWER_CHARS`, or nested deeper than
:data:`pipeline.core.bounds.MAX_DEPTH` levels is a parse failure with that reason (never a ``RecursionError``)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from pipeline.core.bounds import MAX_DEPTH, TooDeep, check_value, too_deep

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n(.*?)```", re.DOTALL)
_THINK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL | re.IGNORECASE)
MAX_ANSWER_CHARS = 2_000_000


@dataclass(frozen=True)
class Parsed:
    answer: dict[str, Any] | None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.answer is not None


def parse_answer(text: Any) -> Parsed:
    """Find the ``{"feedback", "config_changes"}`` object in a model's text."""
    if text is not None and not isinstance(text, str):
        return Parsed(None, f"answer is a {type(text).__name__}, not a string")
    if not text or not text.strip():
        return Parsed(None, "empty answer")
    if len(text) > MAX_ANSWER_CHARS:
        return Parsed(None, f"answer of {len(text)} characters exceeds {MAX_ANSWER_CHARS}")
    text = _THINK.sub("", text)
    if too_deep(text):
        return Parsed(None, f"answer is nested deeper than {MAX_DEPTH} levels")
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    decoder = json.JSONDecoder()
    for chunk in candidates:
        for start in (i for i, ch in enumerate(chunk) if ch == "{"):
            try:
                obj, _ = decoder.raw_decode(chunk, start)
                check_value(obj, "answer")
            except RecursionError:  # a nesting the bracket scan could not see (closers inside strings)
                return Parsed(None, f"answer is nested deeper than {MAX_DEPTH} levels")
            except TooDeep as exc:
                return Parsed(None, str(exc))
            except json.JSONDecodeError:
                continue
            if isinstance(obj, dict) and ("feedback" in obj or "config_changes" in obj):
                changes = obj.get("config_changes", [])
                if not isinstance(changes, list):
                    return Parsed(None, "config_changes is not a list")
                return Parsed({"feedback": obj.get("feedback"), "config_changes": changes})
    return Parsed(None, "no JSON object with 'feedback' / 'config_changes' found")
