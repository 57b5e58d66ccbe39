"""The suite's check that no test leaves a process behind: pytest (each xdist worker) becomes a child subreaper
(Linux ``PR_SET_CHILD_SUBREAPER``), so a process whose parent a test killed is re-parented to it instead of to init
and is still one of its descendants; at the session's end, the descendants still running (after a grace for those
that notice their parent's end by polling, as Dagster's ``watch_orphans`` does each second) fail the session, each
named with its command line, and are then ended."""

from __future__ import annotations

import ctypes
import os
import time
from pathlib import Path

import pytest

from pipeline.core.processes import descendants, end

_PR_SET_CHILD_SUBREAPER = 36
#: seconds the processes left get to end by themselves
GRACE_S = 5.0


def become_subreaper() -> None:
    """Orphaned descendants of this process are re-parented to it (Linux; elsewhere nothing changes)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1)
    except (OSError, AttributeError):
        pass


def _reap() -> None:
    """Collect the ended children nobody waits for (orphans re-parented here end as zombies)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def living(pids: list[int]) -> list[int]:
    """Those of ``pids`` still running (an ended one re-parented here stays a zombie until it is reaped)."""
    out = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in ("Z", "X"):
            out.append(pid)
    return out


def _running() -> list[int]:
    return living(descendants(os.getpid()))


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()[:200]
    except OSError:
        return "?"


def check(session: pytest.Session) -> None:
    """At the session's end: fail it (exit status 1) naming each process a test left running, then end them. Under
    pytest-xdist each worker checks its own (the controller's children are the workers)."""
    if session.config.pluginmanager.get_plugin("dsession") is not None:
        return
    deadline = time.monotonic() + GRACE_S
    while (left := _running()) and time.monotonic() < deadline:
        _reap()
        time.sleep(0.2)
    _reap()
    if not left:
        return
    lines = [f"pid {pid}: {_command(pid)}" for pid in left]
    end(left, grace_s=2.0)
    _reap()
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    message = f"{len(left)} process(es) left running by the tests (a test must stop what it starts): " + "; ".join(
        lines
    )
    if reporter is not None:
        reporter.write_line(message, red=True)
    else:
        print(message)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
