"""Kernel resources stay inside an instance's limits, and no futex is keyed by a file two instances share
(docs/environments.md "Sandbox"): hostile environments run as a corpus's code runs, each in its own instance.

- **pty exhaustion**: there is no ``/dev/ptmx`` inside, so ``os.openpty()`` fails and the host's pty count
  (``/proc/sys/kernel/pty/nr``) does not move;
- **thread exhaustion**: live threads stop at ``RLIMIT_NPROC`` (its uid's, per instance under root);
- **inode exhaustion**: empty files stop at the instance's tmpfs inode limit (``isolation.TMP_INODES``, under
  root), not at the host's slab memory;
- **file-backed futexes**: a shared futex wake on a page of a venv file, and a read-only shared mapping of it, are
  refused naming the syscall (``sandbox_refused`` steps), while private futexes and threads work.
"""

from __future__ import annotations

import os

import pytest

from pipeline.core.trajectory import Action, Trajectory
from pipeline.envs import envscaler
from pipeline.execution import isolation
from pipeline.execution.sandbox import Limits, Sandbox

HOSTILE = r'''
import ctypes, mmap, os, threading

class Hog:
    def __init__(self, init_config=None):
        self.made = 0

    def ptys(self, count: int):
        """Open pseudo-terminals until refused."""
        held = []
        try:
            for _ in range(count):
                held.append(os.openpty())
        except OSError as exc:
            return {"success": False, "error": f"{type(exc).__name__}: {exc}", "opened": len(held)}
        return {"success": True, "opened": len(held)}

    def inodes(self, count: int):
        """Create empty files until refused."""
        os.mkdir("many")
        try:
            for i in range(count):
                open(f"many/{i}", "w").close()
                self.made += 1
        except OSError as exc:
            return {"success": False, "error": f"{type(exc).__name__}: {exc.strerror}", "made": self.made}
        return {"success": True, "made": self.made}

    def threads(self, count: int):
        """Start threads that stay alive until refused."""
        stop, started = threading.Event(), 0
        try:
            for _ in range(count):
                threading.Thread(target=stop.wait, daemon=True).start()
                started += 1
        except RuntimeError as exc:
            return {"success": False, "error": str(exc), "started": started}
        finally:
            stop.set()
        return {"success": True, "started": started}

    def futex_wake(self):
        """FUTEX_WAKE (shared) on the first page of a file every instance maps: a channel to another instance."""
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.syscall.restype = ctypes.c_long
        fd = os.open(os.__file__, os.O_RDONLY)
        addr = libc.mmap(None, 4096, 1, 2, fd, 0)  # MAP_PRIVATE, read-only: the page cache's page
        woken = libc.syscall(202 if os.uname().machine == "x86_64" else 98, ctypes.c_void_p(addr), 1, 1, 0, 0, 0)
        if woken < 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code))
        return {"success": True, "woken": woken}

    def shared_map(self):
        """A read-only MAP_SHARED mapping of a venv file."""
        with open(os.__file__, "rb") as fh:
            view = mmap.mmap(fh.fileno(), 4096, access=mmap.ACCESS_READ)
        return {"success": True, "first": view[:4].hex()}

    def private_sync(self):
        """What stays: threads, locks and conditions (private futexes)."""
        cond, box = threading.Condition(), []
        def work():
            with cond:
                box.append(1)
                cond.notify()
        t = threading.Thread(target=work)
        with cond:
            t.start()
            cond.wait_for(lambda: box, timeout=5)
        t.join()
        return {"success": True, "box": box}
'''


def _run(*calls: tuple[str, dict]) -> list[dict]:
    item = envscaler.parse_env_item("hostile/kernel", {"env_class_name": "Hog", "env_class_code": HOSTILE})
    assert not item.problems, item.problems
    actions = tuple(Action(tool, args, turn=i) for i, (tool, args) in enumerate(calls))
    trajectory = Trajectory("hostile/kernel/0", "task", item.spec({}), actions)
    with Sandbox(limits=Limits(call_timeout_s=60)) as box:
        [(_, result)] = list(box.run([trajectory]))
    assert result["init"] is not None, result["init_error"]
    return result["steps"]


def _ptys() -> int:
    with open("/proc/sys/kernel/pty/nr") as fh:
        return int(fh.read())


def test_no_pty_from_the_hosts_pool():
    before = _ptys()
    [step] = _run(("ptys", {"count": 64}))
    assert "FileNotFoundError" in step["raw_observation"] and "'opened': 0" in step["raw_observation"], step
    assert _ptys() == before


@pytest.mark.skipif(os.geteuid() != 0, reason="the inode limit is mounted under root (docs/environments.md)")
def test_empty_files_stop_at_the_instances_inode_limit():
    [step] = _run(("inodes", {"count": 100_000}))
    assert "No space left on device" in step["raw_observation"], step["raw_observation"]
    made = int(step["raw_observation"].split("'made': ")[1].rstrip("}"))
    assert isolation.TMP_INODES - 64 <= made < isolation.TMP_INODES, made  # the worker's own few inodes aside


def test_live_threads_stop_at_the_process_limit():
    [step] = _run(("threads", {"count": 2000}))
    assert "can't start new thread" in step["raw_observation"], step["raw_observation"]
    started = int(step["raw_observation"].split("'started': ")[1].rstrip("}"))
    assert 0 < started < 256, started  # RLIMIT_NPROC (the worker's, 256) counts the instance's uid's threads


def test_no_futex_keyed_by_a_shared_file_and_no_shared_file_mapping():
    wake, shared, private = _run(("futex_wake", {}), ("shared_map", {}), ("private_sync", {}))
    assert (wake["outcome"], shared["outcome"]) == ("sandbox_refused", "sandbox_refused"), (wake, shared)
    assert wake["error_message"].startswith("the sandbox refused syscall 'futex'"), wake["error_message"]
    assert shared["error_message"].startswith("the sandbox refused syscall 'mmap'"), shared["error_message"]
    assert private["outcome"] == "success" and "'box': [1]" in private["raw_observation"], private
