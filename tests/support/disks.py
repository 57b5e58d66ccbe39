"""Small filesystems mounted by a test: a tmpfs of a given size (a full disk), read-only or not. Mounting needs root
(and a kernel that lets this process mount); a test that cannot mount is skipped with the reason."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def _mount(*args: str) -> None:
    proc = subprocess.run(["mount", *args], capture_output=True, text=True, check=False)
    if proc.returncode:
        raise OSError(proc.stderr.strip() or f"mount {' '.join(args)} exited {proc.returncode}")


@contextmanager
def tmpfs(where: Path, size: str = "2m", read_only: bool = False) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted on ``where`` (made) for the block, read-only with ``read_only``; unmounted after.
    Skips the test when this process is not root or the mount is refused."""
    if os.geteuid() != 0:
        pytest.skip(f"mounting a small tmpfs needs root (this test runs as uid {os.geteuid()})")
    where.mkdir(parents=True, exist_ok=True)
    try:
        _mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where))
    except (OSError, FileNotFoundError) as exc:
        pytest.skip(f"cannot mount a tmpfs here: {exc}")
    try:
        if read_only:
            _mount("-o", "remount,ro", str(where))
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, check=False)


def remount(where: Path, size: str) -> None:
    """Grow (or shrink) the tmpfs mounted on ``where`` to ``size``, read-write: the disk freed for the next run."""
    _mount("-o", f"remount,rw,size={size}", str(where))


def fill(where: Path) -> None:
    """Fill the filesystem of ``where`` to the last block (a file ``fill`` of zeros; dd stops at ENOSPC)."""
    subprocess.run(["dd", "if=/dev/zero", f"of={where / 'fill'}", "bs=4096"], capture_output=True, check=False)
