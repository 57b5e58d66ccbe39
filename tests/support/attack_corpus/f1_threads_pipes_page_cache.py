from tests.support.attack_corpus._refused import refused_except

FAMILY = "F1"
DESCRIPTION = "Starts 600 threads (RLIMIT_NPROC), fills pipe buffers (memory outside RLIMIT_AS) and evicts a shared stdlib file's pages (page-cache channel)."
CLASS = "Spawner"
CODE = r'''
import os, threading, json

class Spawner:
    def __init__(self, init_config=None):
        self.n = 0

    def spawn(self):
        """Threads, pipes, fadvise, a raw socket through _socket."""
        out = {}
        started = 0
        try:
            for _ in range(600):
                threading.Thread(target=lambda: None, daemon=True).start()
                started += 1
            out["threads"] = f"started {started}"
        except RuntimeError as exc:
            out["threads"] = "RuntimeError" if started == 0 else f"started {started}"
        try:
            r, w = os.pipe()
            out["pipe"] = "created"
        except OSError as exc:
            out["pipe"] = type(exc).__name__
        try:
            fd = os.open(json.__file__, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                out["fadvise"] = "evicted"
            finally:
                os.close(fd)
        except OSError as exc:
            out["fadvise"] = type(exc).__name__
        return {"success": True, "data": out}
'''
ACTIONS = [("spawn", {}), ("spawn", {})]
#: threads and pipes are what an event loop needs (these threads end at once; live ones stop at RLIMIT_NPROC, per
#: instance under root: tests/execution/test_kernel_resources.py), a pipe's buffer counts against the uid's pipe
#: pages; evicting a shared file's pages (the page-cache channel) stays refused
check = refused_except({"pipe", "threads"})
