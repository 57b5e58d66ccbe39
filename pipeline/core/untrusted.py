"""Untrusted ids and text (from corpora, LLM-generated): the one home of id validation and of escaping for every
report. At ingestion an id must match :data:`SAFE_ID` (a tool name :data:`SAFE_TOOL`; :func:`id_problem` says why
not); at every output whatever got in anyway is escaped for its medium: :func:`md`, :func:`console`,
:func:`console_text`, :func:`log_line`, :func:`card`.
"""

from __future__ import annotations

import re
from typing import Any

#: an environment id (``<source>/<id>``, ``bfcl/GorillaFileSystem``…)
SAFE_ID = re.compile(r"[A-Za-z0-9._:/-]{1,200}")
#: a tool name (an OpenAI function name: also a Python method name)
SAFE_TOOL = re.compile(r"[A-Za-z0-9_.:-]{1,200}")

# C0 controls, DEL, C1 controls, and the Unicode format characters that reorder or hide text
# (bidi overrides and isolates, zero-width joiners, line/paragraph separators)
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff]")
_CONTROL_KEEP_LINES = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff]")
_MD_SPECIAL = re.compile(r"[\\|`\[\]<>&*]")
_MD_ENTITIES = {"<": "&lt;", ">": "&gt;", "&": "&amp;"}


def _visible(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _encodable(text: str) -> str:
    # lone surrogates escaped: every writer downstream would fail on them
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def shown(value: Any, limit: int = 120) -> str:
    """``value`` as text safe anywhere (console, Markdown, card, logs): control characters visible as
    ``\\x1b``, lone surrogates escaped, cut to ``limit`` characters. For ids inside messages."""
    text = console(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def id_problem(value: Any, what: str = "env id", pattern: re.Pattern[str] = SAFE_ID) -> str | None:
    """Why ``value`` is not a safe id (its reason names it, escaped), or None when it is."""
    if not isinstance(value, str):
        return f"{what} is a {type(value).__name__}, not a string"
    if pattern.fullmatch(value):
        return None
    allowed = pattern.pattern.partition("{")[0]  # the character class
    return f"{what} {shown(value)!r} is not a safe name: only {allowed}, 1 to 200 characters, are accepted"


def md(value: Any) -> str:
    """Text for a Markdown table cell (or inline Markdown): Markdown specials escaped, HTML as entities, control
    characters made visible, so no cell can end a row, open a link or inject HTML."""
    if value is None:
        return ""
    text = _MD_SPECIAL.sub(lambda m: _MD_ENTITIES.get(m.group()) or "\\" + m.group(), _encodable(str(value)))
    return _CONTROL.sub(_visible, text)


def console(value: Any) -> str:
    """One terminal line: every control character (ESC, newline, carriage return…) made visible."""
    return _CONTROL.sub(_visible, _encodable(str(value)))


def console_text(value: Any) -> str:
    """Multi-line terminal output (a report): newlines and tabs kept, every other control character
    (an ESC sequence, a carriage return that overwrites a line) made visible."""
    return _CONTROL_KEEP_LINES.sub(_visible, _encodable(str(value)))


def log_line(value: Any) -> str:
    """One log message: :func:`console_text` with every line after its first indented, so no text inside a
    message can start a line of its own (a forged "all checks passed" stays visibly part of its message)."""
    return console_text(value).replace("\n", "\n    ")


def card(value: Any) -> str:
    """Text inside a dataset card's Markdown body (rendered as Markdown and HTML on the Hub)."""
    return md(value)
