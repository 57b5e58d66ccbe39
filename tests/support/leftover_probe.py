"""Run only by tests/project/test_no_leftover_processes.py (its name keeps it out of the suite): a test that
starts a process in a session of its own and leaves it running, which the session-end check must catch."""

import os
import subprocess
from pathlib import Path


def test_leaves_a_process_behind(tmp_path):
    proc = subprocess.Popen(["sleep", "300"], start_new_session=True)
    Path(os.environ["LEFTOVER_PID_FILE"]).write_text(str(proc.pid))
