"""One writer per data root: ``./forge run`` holds ``<root>/.forge-run.lock`` (an ``flock`` the kernel releases
when its process ends) while it runs. The file names the holder (pid, its start time, when), so a second run names
it, and a lock left by a process that is gone is taken over with a note."""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from dataclasses import asdict, dataclass
from pathlib import Path

#: the lock file in a data root
LOCK_FILE = ".forge-run.lock"


def process_start(pid: int) -> int | None:
    """The start time of process ``pid`` in clock ticks since boot (``/proc/<pid>/stat`` field 22), None when there
    is no such process (or it is a zombie: it has ended)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return None if fields[0] in ("Z", "X") else int(fields[19])
    except (OSError, IndexError, ValueError):  # gone, or gone while being read (a short, cut-off line)
        return None


def process_alive(pid: int, start: int | None, host: str | None = None) -> bool:
    """Whether the process ``pid`` that started at ``start`` (:func:`process_start`) is still there; a process on
    another ``host`` counts as alive (it cannot be checked from here)."""
    if host is not None and host != socket.gethostname():
        return True
    now = process_start(pid)
    return now is not None and (start is None or now == start)


@dataclass(frozen=True)
class Holder:
    """Who holds a data root: process ``pid`` (started at ``start`` ticks, on ``host``), since ``started`` (UTC)."""

    pid: int
    start: int | None
    host: str
    started: str

    @classmethod
    def me(cls) -> Holder:
        pid = os.getpid()
        return cls(pid, process_start(pid), socket.gethostname(), time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))

    @property
    def tag(self) -> str:
        """The holder as one string (a Dagster run tag: :func:`parse_tag` reads it back)."""
        return f"{self.pid}:{self.start}:{self.host}"


def parse_tag(tag: str) -> tuple[int, int | None, str] | None:
    """(pid, start, host) of a :attr:`Holder.tag`, None when it is not one."""
    pid, _, rest = tag.partition(":")
    start, _, host = rest.partition(":")
    if not pid.isdigit() or not host:
        return None
    return int(pid), int(start) if start.isdigit() else None, host


def read_holder(root: Path) -> Holder | None:
    """The holder the lock file of ``root`` names (the last one, maybe gone), None when there is none."""
    try:
        return Holder(**json.loads((root / LOCK_FILE).read_text()))
    except (OSError, ValueError, TypeError):
        return None


class RootInUse(Exception):
    """The data root is held by a live process (``holder``)."""

    def __init__(self, root: Path, holder: Holder | None) -> None:
        super().__init__(str(root))
        self.root = root
        self.holder = holder


def acquire(root: Path) -> tuple[int, Holder | None]:
    """Take the lock of ``root`` for this process: its file descriptor (closing it releases the lock) and the
    previous holder when it ended without releasing it; :class:`RootInUse` when a live process holds it."""
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise RootInUse(root, read_holder(root)) from None
    previous = read_holder(root)
    stale = previous if previous is not None and previous.pid != os.getpid() else None
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(asdict(Holder.me())).encode(), 0)
    return fd, stale


def release(fd: int, root: Path) -> None:
    """Give the lock of ``root`` back (the file says nobody holds it)."""
    try:
        os.ftruncate(fd, 0)
    finally:
        os.close(fd)


def held_by(root: Path) -> Holder | None:
    """The live process holding ``root``'s lock now, else None (a reader's check: ``./forge sql``)."""
    path = root / LOCK_FILE
    if not path.is_file():
        return None
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return read_holder(root) or Holder(0, None, socket.gethostname(), "?")
    finally:
        os.close(fd)  # closing drops a shared lock taken just now
    return None
