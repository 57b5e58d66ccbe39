"""Reading untrusted corpus, task and history files record by record.

A bad byte, a wrong type or a repeated id in one record is reported as an issue naming the file and
the record, bounded in size, and the other records are still read (docs/definitions.md §3: corpora are
LLM-generated). Helpers shared by the bfcl, EnvScaler and message-history readers:

* files are decoded with ``surrogateescape``, so a non-UTF-8 byte survives parsing as a lone
  surrogate and :func:`undecodable` finds the record (and field) that holds it;
* JSON line files are decoded line by line (:func:`read_lines`), so one bad line is one issue;
* :class:`FirstSeen` keeps the first occurrence of an id and reports later ones with both origins;
* :func:`json_pairs` keeps the repeated keys of a JSON object (``json.loads`` silently keeps the last).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

MAX_MESSAGE = 300  # characters of a value quoted in an issue
_SURROGATE = re.compile("[\ud800-\udfff]")


def clip(text: Any, limit: int = MAX_MESSAGE) -> str:
    """``text`` cut to ``limit`` characters, saying how long it was."""
    text = str(text)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters)"


def _describe(text: str, where: str) -> str | None:
    """Where ``text`` holds its first lone surrogate (an undecodable byte under ``surrogateescape``), as a message;
    None when it holds none."""
    found = _SURROGATE.search(text)
    if found is None:
        return None
    i, ch = found.start(), found.group()
    what = f"byte 0x{ord(ch) - 0xDC00:02x}" if "\udc80" <= ch <= "\udcff" else f"lone surrogate U+{ord(ch):04X}"
    before = text[max(0, i - 20) : i].encode("utf-8", "replace").decode("utf-8", "replace")
    return f"not valid UTF-8: {what} in {where} after {before!r}"


def undecodable(value: Any, where: str = "the record", depth: int = 0) -> str | None:
    """Where ``value`` (parsed from a ``surrogateescape``-decoded file) holds a byte that is not UTF-8,
    as a message; None when it is clean. Keys and strings at any depth are checked."""
    if depth > 200:
        return None
    if isinstance(value, str):
        return _describe(value, where)
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and (bad := _describe(key, f"a key of {where}")):
                return bad
            found = undecodable(item, f"field {clip(key, 60)!r}" if depth == 0 else where, depth + 1)
            if found:
                return found
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            found = undecodable(item, f"item {i}" if depth == 0 else where, depth + 1)
            if found:
                return found
    return None


def read_text(path: Path) -> str:
    """A whole file as text; bytes that are not UTF-8 become lone surrogates (see :func:`undecodable`)."""
    return Path(path).read_bytes().decode("utf-8", "surrogateescape")


def read_lines(path: Path) -> Iterator[tuple[int, str | None, str | None]]:
    """(line number, text, error) for every non-blank line; a line that is not UTF-8 is an error naming
    the byte and its column, and the following lines are still read."""
    with Path(path).open("rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                bad = raw[exc.start : exc.start + 1].hex()
                yield (
                    lineno,
                    None,
                    f"line is not valid UTF-8: byte 0x{bad} at column {exc.start + 1}: "
                    f"{clip(raw[: exc.start][-40:], 60)}",
                )
                continue
            if line.strip():
                yield lineno, line, None


class Pairs(dict):
    """A JSON object with its repeated keys: ``pairs`` holds every (key, value) in file order."""

    pairs: list[tuple[str, Any]]


def json_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` for ``json.loads``: a plain dict (last value wins, as JSON readers do), or a
    :class:`Pairs` remembering every pair when a key repeats, so a reader can keep the first and report
    the others."""
    out = dict(pairs)
    if len(out) == len(pairs):
        return out
    dup = Pairs(out)
    dup.pairs = list(pairs)
    return dup


def entries(doc: dict[str, Any]) -> list[tuple[str, Any]]:
    """Every (key, value) of a parsed JSON object, repeated keys included, in file order."""
    return list(doc.pairs) if isinstance(doc, Pairs) else list(doc.items())


def loads(text: str) -> Any:
    """``json.loads`` keeping repeated keys (:func:`json_pairs`)."""
    return json.loads(text, object_pairs_hook=json_pairs)


class FirstSeen:
    """First occurrence wins: ``seen(key, origin)`` is None the first time, else the first origin."""

    def __init__(self) -> None:
        self._first: dict[Any, str] = {}

    def seen(self, key: Any, origin: str) -> str | None:
        if key in self._first:
            return self._first[key]
        self._first[key] = origin
        return None

    def message(self, what: str, key: Any, origin: str, first: str) -> str:
        """The issue text for a repeated id."""
        return f"duplicate {what} {clip(repr(key), 80)} at {origin}: the first, at {first}, is kept"
