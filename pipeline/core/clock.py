"""The frozen clock's timeline (docs/definitions.md §4.4): when a trajectory's clock starts and what time it reads
during each action. The sandbox installs the clock (:mod:`pipeline.execution.freeze`); samples and
prompts state the same times from here.
"""

from __future__ import annotations

import datetime as _dt
import hashlib

_DATETIME = _dt.datetime  # bound at import, before the sandbox child replaces datetime.datetime

#: default clock start when a trajectory does not name one (UTC, ISO 8601)
DEFAULT_CLOCK_START = "2025-01-06T09:00:00+00:00"
#: the wall clock advances this much per step (action i runs at clock_start + (i + 1) × STEP_SECONDS)
STEP_SECONDS = 60


def parse_time(text: str, what: str) -> _dt.datetime:
    """An ISO 8601 date-time (naive means UTC); a ``ValueError`` naming ``what`` when ``text`` is not one."""
    try:
        moment = _DATETIME.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError as exc:
        raise ValueError(f"{what} {text!r} is not an ISO 8601 date-time") from exc
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=_dt.UTC)


def parse_clock_start(clock_start: str | None) -> float:
    """Epoch seconds of an ISO 8601 clock start (naive means UTC)."""
    return parse_time(clock_start or DEFAULT_CLOCK_START, "clock_start").timestamp()


def step_time(clock_start: str | None, step_index: int | None) -> str:
    """The frozen wall-clock time (ISO 8601, UTC) during action ``step_index`` (None: the reset)."""
    seconds = parse_clock_start(clock_start) + (0 if step_index is None else (step_index + 1) * STEP_SECONDS)
    return _DATETIME.fromtimestamp(seconds, _dt.UTC).isoformat()


def derive_clock_start(trajectory_id: str, seed: int) -> str:
    """A per-trajectory clock start: a whole minute in 2025, from (seed, trajectory id)."""
    h = int.from_bytes(hashlib.blake2b(f"clock:{seed}:{trajectory_id}".encode(), digest_size=8).digest(), "big")
    base = parse_clock_start("2025-01-01T00:00:00+00:00")
    return _DATETIME.fromtimestamp(base + h % (364 * 24 * 60) * 60, _dt.UTC).isoformat()
