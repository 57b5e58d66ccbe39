"""Progress of a long phase, as log lines: ``phase: done/total unit (pct) rate/s ETA mm:ss``, at most once per
``every`` seconds and once when the phase is done (the log only, never the data files). The clock is injectable
so that rates and ETAs can be tested without waiting.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

Log = Callable[[str], None]

#: seconds between two progress lines of one phase (the last line, at the end, is always written)
EVERY = 5.0


def clock_text(seconds: float) -> str:
    """``mm:ss`` (``h:mm:ss`` from an hour on) of a duration, rounded up to the second."""
    whole = max(0, int(-(-seconds // 1)))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


@dataclass(eq=False)
class Progress:
    """Counts the units of one phase done so far and logs them against the total, rate-limited."""

    phase: str
    total: int
    log: Log
    unit: str = ""
    every: float = EVERY
    clock: Callable[[], float] = time.monotonic
    detail: Callable[[], str] | None = None  # extra text after the counts, read when a line is written
    finish_at_total: bool = True  # False: the caller ends the phase (with its note) by finish()
    ceiling: int | None = None  # the most the total may grow to (exploration's budget): a line gives its ETA too

    def __post_init__(self) -> None:
        self.total = max(0, int(self.total))
        self.done = 0
        self.started = self._last = self.clock()  # _last: when the last line was written
        self._begun = self._finished = False

    def begin(self) -> None:
        """The phase's work starts now (set up earlier): rate and ETA count from here; only the first call counts."""
        if not self._begun:
            self._begun = True
            self.started = self._last = self.clock()

    def rate(self, now: float | None = None) -> float:
        """Units per second since the phase started."""
        elapsed = (self.clock() if now is None else now) - self.started
        return self.done / elapsed if elapsed > 0 else 0.0

    def eta(self, now: float | None = None) -> float | None:
        """Seconds left at the rate so far (None until something is done)."""
        rate = self.rate(now)
        return max(0, self.total - self.done) / rate if rate > 0 else None

    def line(self, now: float | None = None, note: str = "") -> str:
        now = self.clock() if now is None else now
        unit = f" {self.unit}" if self.unit else ""
        pct = 100 * min(self.done, self.total) // self.total if self.total else 100  # floor: 100% only when done
        text = f"{self.phase}: {self.done:,}/{self.total:,}{unit} ({pct}%) {self.rate(now):,.1f}/s"
        if self._finished:
            text += f" in {clock_text(now - self.started)}"
        else:
            eta = self.eta(now)
            text += f" ETA {clock_text(eta) if eta is not None else '--:--'}"
            if eta is not None and self.ceiling is not None and self.ceiling > self.total:
                longest = max(0, self.ceiling - self.done) / self.rate(now)
                text += f" (up to {clock_text(longest)} if the total grows to {self.ceiling:,})"
        extra = ", ".join(x for x in ((self.detail() if self.detail else ""), note) if x)
        return f"{text}; {extra}" if extra else text

    def _emit(self, now: float, note: str = "") -> None:
        self._last = now
        self.log(self.line(now, note))

    def advance(self, n: int = 1) -> None:
        """``n`` more units done: a line when ``every`` seconds passed since the last one; the last
        line when the total is reached (unless ``finish_at_total`` is off)."""
        if self._finished:
            return
        self._begun = True
        self.done += n
        now = self.clock()
        if self.finish_at_total and self.total and self.done >= self.total:
            self.finish()
        elif now - self._last >= self.every:
            self._emit(now)

    def finish(self, note: str = "") -> None:
        """The phase is over (maybe short of its total): its last line, once."""
        if self._finished:
            return
        self._finished = True
        self._emit(self.clock(), note)
