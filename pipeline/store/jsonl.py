"""Resumable JSON-lines files: one JSON object a line, flushed as each record finishes (a killed run loses at most
the line it was writing), read back at the start of a re-run to skip what is done."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO


def read_rows(path: Path) -> Iterator[dict[str, Any]]:
    """The JSON objects of ``path`` in file order; a line that is not a JSON object (the torn last line of
    a killed run) is skipped, and a missing file has no rows."""
    if not path.exists():
        return
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(row, dict):
                yield row


class Appender:
    """Appends one JSON object a line to ``path`` (its folder created), flushed after each line. Use as a
    context manager; ``ensure_ascii`` and ``default`` are :func:`json.dumps`'s."""

    def __init__(self, path: Path, ensure_ascii: bool = False, default: Any = None) -> None:
        self.path = path
        self.ensure_ascii = ensure_ascii
        self.default = default
        self._fh: TextIO | None = None

    def __enter__(self) -> Appender:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = self.path.open("a", encoding="utf-8")
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def write(self, row: dict[str, Any]) -> None:
        if self._fh is None:
            raise RuntimeError(f"{self.path}: an Appender writes only inside its 'with' block")
        self._fh.write(json.dumps(row, ensure_ascii=self.ensure_ascii, default=self.default) + "\n")
        self._fh.flush()
