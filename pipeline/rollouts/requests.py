"""The request log of a rollout run: every completed model request (simulator or agent), appended and flushed as it
finishes, keyed by (rollout, step, role, prompt hash). A re-run replays the loop and takes every logged answer from
here, so it asks nothing twice; a request that failed (after retries) is not logged and is asked again."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from pipeline.store.jsonl import Appender, read_rows


def prompt_key(*parts: Any) -> str:
    """A stable key for a request: the rollout position and a hash of what is sent."""
    payload = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.blake2b(payload.encode(), digest_size=16).hexdigest()


class RequestLog(Appender):
    """Completed requests of one run, read at start (a torn last line from a kill is ignored)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, default=str)
        self.entries: dict[str, dict[str, Any]] = {row["key"]: row for row in read_rows(path) if "key" in row}
        self.asked = 0  # requests sent in this run
        self.reused = 0  # answers taken from the log

    def __enter__(self) -> RequestLog:
        super().__enter__()
        return self

    def get(self, key: str) -> dict[str, Any] | None:
        row = self.entries.get(key)
        if row is not None:
            self.reused += 1
        return row

    def put(self, key: str, record: dict[str, Any]) -> dict[str, Any]:
        row = {"key": key, **record}
        self.entries[key] = row
        if self._fh is None:
            raise RuntimeError("RequestLog must be used as a context manager to record requests")
        self.write(row)
        return row
