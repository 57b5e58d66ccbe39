"""``./forge ui``: the Dagster UI (``dg dev``) on the data root's run history, and how it is stopped."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from contextlib import suppress
from pathlib import Path

from cli.base import ROOT, child_env, command, say_problems, settings_problems, wants_help


def ui_parser() -> argparse.ArgumentParser:
    """``./forge ui``'s options: the ``dg dev`` options docs/ui.md uses (``-h`` is the help here, not dg dev's host);
    every other ``dg dev`` option is passed on as it is."""
    parser = argparse.ArgumentParser(
        prog="./forge ui",
        description=(
            "Start the Dagster UI (dg dev -w workspace.yaml) on this data root's run history until Ctrl-C or a signal "
            "(SIGTERM, SIGINT, SIGHUP) stops it. Any other option of dg dev (dg dev --help) is passed on as it is."
        ),
    )
    parser.add_argument("-p", "--port", type=int, help="the webserver's port (default 3000)")
    parser.add_argument("--host", help="the webserver's host (default 127.0.0.1)")
    return parser


@command("           set up, start the Dagster UI (dg dev) on http://127.0.0.1:3000")
def ui(argv: list[str]) -> int:
    """``./forge ui``: the Dagster UI (``dg dev`` on the project's workspace, ``assets/dev_ui.py``), on this data
    root's run history, until a signal stops it (:func:`_serve_ui`)."""
    parser = ui_parser()
    if wants_help(argv):
        parser.print_help()
        return 0
    parser.parse_known_args(argv)  # a value that does not parse (-p abc) is one usage error, exit 2
    if say_problems(settings_problems(), "./forge ui: "):
        return 2
    env = child_env()
    return _serve_ui([sys.executable, "-m", "assets.dev_ui", "-w", str(ROOT / "workspace.yaml"), *argv], env)


#: seconds the UI's processes get to end after ``dg dev`` has (then they are killed)
UI_GRACE_S = 5.0


def _ui_child() -> None:
    """The UI's set-up in the child: the interrupt signals at their defaults (a job started in the background by a
    script inherits SIGINT ignored, and Dagster maps SIGTERM to SIGINT's handler, so both were ignored), and SIGTERM
    when ``./forge ui`` dies (Linux ``PR_SET_PDEATHSIG``), so a ``./forge ui`` killed with SIGKILL still stops
    ``dg dev``, which then stops its own processes."""
    import ctypes

    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    with suppress(OSError, AttributeError):  # not Linux: the other signals still stop it
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG = 1


def _group_alive(pgid: int) -> bool:
    """Whether a live process (not a zombie waiting for its parent to reap it) is in process group ``pgid``."""
    for stat in Path("/proc").glob("[0-9]*/stat"):  # Linux (the sandbox needs it): procfs
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()  # after "pid (comm)": state, ppid, pgrp, ...
        except (OSError, IndexError):  # the process ended meanwhile
            continue
        if fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
            return True
    return False


def _serve_ui(argv: list[str], env: dict[str, str]) -> int:
    """Run the UI (``argv``: ``dg dev`` and the webserver, daemon and code servers it starts) in a process group
    of its own, and stop it when this process gets SIGINT (Ctrl-C), SIGTERM or SIGHUP, also when it runs in the
    background: ``dg dev`` is interrupted once (it stops the webserver and the daemon, which stop their code
    servers), and whatever of its process group is still there after it ended is ended too (SIGTERM, then SIGKILL
    after :data:`UI_GRACE_S`); a second signal kills the group at once. Exit 0 when a signal stopped it, else
    ``dg dev``'s status."""
    sys.stdout.flush()
    sys.stderr.flush()
    child = subprocess.Popen(argv, env=env, process_group=0, preexec_fn=_ui_child)
    stops: list[int] = []

    def stop(signum: int, _frame: object) -> None:
        stops.append(signum)
        with suppress(ProcessLookupError):
            if len(stops) == 1:
                os.kill(child.pid, signal.SIGINT)  # dg dev's KeyboardInterrupt: its own orderly shutdown
            else:
                os.killpg(child.pid, signal.SIGKILL)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, stop)
    try:
        code = child.wait()
    finally:
        for sig, wait in ((signal.SIGTERM, UI_GRACE_S), (signal.SIGKILL, UI_GRACE_S)):
            if not _group_alive(child.pid):
                break
            try:
                os.killpg(child.pid, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + wait
            while _group_alive(child.pid) and time.monotonic() < deadline:
                time.sleep(0.1)
    return 0 if stops else code
