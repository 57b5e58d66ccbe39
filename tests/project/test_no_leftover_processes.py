"""The suite's session-end check (tests/support/leftovers.py) fails a session that left a process running, names
it, and ends it."""

import os
import subprocess
import sys
from pathlib import Path

from pipeline.core.root_lock import process_start

ROOT = Path(__file__).resolve().parents[2]


def test_a_session_that_leaves_a_process_behind_fails_naming_it(tmp_path):
    pid_file = tmp_path / "pid"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "0", "-p", "no:cacheprovider", "-q", "tests/support/leftover_probe.py"],
        cwd=ROOT,
        env={**os.environ, "LEFTOVER_PID_FILE": str(pid_file)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    pid = int(pid_file.read_text())
    assert proc.returncode == 1, proc.stdout[-2000:]
    assert f"1 process(es) left running by the tests (a test must stop what it starts): pid {pid}: sleep 300" in (
        proc.stdout
    )
    assert process_start(pid) is None  # ended by the check
