"""A full disk and a read-only data root through ``./forge run`` (issue 52, item 3, slow; the disks are tmpfs mounts
the test makes, so it runs as root or is skipped with the reason): on a 2 MB disk the run ends in one line naming the
step, the path and the bytes, with no traceback and no half-written table; once the disk has room the next plain run
succeeds with no hand repair; a read-only root is refused in one line before anything starts."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.support.disks import remount, tmpfs
from tests.support.user_corpora import PROJECT

pytestmark = pytest.mark.slow


def _run(root: Path) -> subprocess.CompletedProcess:
    """``./forge run`` on the small profile with the data root ``root`` and its own run history under it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENVSIM_") and k != "DAGSTER_HOME"}
    env.update(ENVSIM_DATA_ROOT=str(root), ENVSIM_PROFILE="small")
    return subprocess.run(
        ["./forge", "run"], cwd=PROJECT, env=env, capture_output=True, text=True, timeout=1500, check=False
    )


def test_a_full_disk_ends_in_one_line_and_the_next_run_on_a_freed_disk_succeeds(tmp_path):
    with tmpfs(tmp_path / "disk", "2m") as disk:
        root = disk / "data"
        full = _run(root)
        out = full.stdout + full.stderr
        assert full.returncode == 1, out[-3000:]
        last = full.stderr.strip().splitlines()[-1]
        assert last.startswith("./forge run: FAILED at step "), out[-3000:]
        assert "out of space writing " in last and " bytes free of " in last and "bytes under the data root" in last
        assert "Traceback" not in out and "Stack Trace" not in out, out[-3000:]
        assert not [p for p in root.rglob(".*.tmp")]  # no temporary file of a table left behind
        remount(disk, "1g")  # the disk freed
        again = _run(root)
        assert again.returncode == 0, (again.stdout + again.stderr)[-3000:]
        assert "benchmark current: " in again.stdout


def test_a_read_only_root_is_refused_in_one_line(tmp_path):
    with tmpfs(tmp_path / "ro", "2m", read_only=True) as ro:
        proc = _run(ro / "data")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == (
        f"the data root {ro / 'data'} (its nearest existing folder {ro}) is not writable by this user or is on a "
        "read-only filesystem: set ENVSIM_DATA_ROOT to a writable directory on a disk with free space\n"
    )
