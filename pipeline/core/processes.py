"""The processes a command started, found (Linux ``/proc``, also those in sessions of their own) and ended by the
command: SIGTERM, then SIGKILL after a grace; :func:`die_with_parent` signals a child whose parent was SIGKILLed."""

from __future__ import annotations

import ctypes
import os
import signal
import time
from contextlib import suppress
from pathlib import Path

from pipeline.core.root_lock import process_start

_PR_SET_PDEATHSIG = 1


def descendants(pid: int) -> list[int]:
    """Every descendant of ``pid`` (depth first), read from ``/proc/<pid>/task/*/children``."""
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children = (task / "children").read_text().split()
        except OSError:
            continue
        for child in map(int, children):
            out += [child, *descendants(child)]
    return out


def running(pid: int) -> bool:
    """Whether process ``pid`` exists and has not ended (a zombie nobody reaped yet has ended)."""
    return process_start(pid) is not None


def end_descendants(grace_s: float = 3.0, pid: int | None = None) -> list[int]:
    """End every descendant of ``pid`` (default: this process) (:func:`end`). Returns them."""
    return end(descendants(pid or os.getpid()), grace_s)


def end(found: list[int], grace_s: float = 3.0) -> list[int]:
    """End the processes ``found``: SIGTERM, then SIGKILL to those still there after ``grace_s``. Returns them."""
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 0.0)):
        living = [p for p in found if running(p)]
        for p in living:
            with suppress(ProcessLookupError, PermissionError):
                os.kill(p, sig)
        deadline = time.monotonic() + wait
        while wait and any(running(p) for p in living) and time.monotonic() < deadline:
            time.sleep(0.05)
    return found


def die_with_parent(sig: int = signal.SIGTERM) -> None:
    """In a child before it runs its program (``subprocess.Popen(preexec_fn=...)``): the kernel sends it ``sig`` when
    the thread that started it ends, also when that process is SIGKILLed (Linux ``PR_SET_PDEATHSIG``)."""
    with suppress(OSError, AttributeError):  # not Linux: the parent's own signal handling still stops it
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(sig))
