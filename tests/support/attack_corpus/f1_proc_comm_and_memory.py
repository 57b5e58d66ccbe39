from tests.support.attack_corpus._refused import all_refused as check  # noqa: F401

FAMILY = "F1"
DESCRIPTION = "Reads /proc: the worker's and siblings' comm, its own memory (scanning for another environment's secret), pid 1's argv, the boot line, mountinfo."
CLASS = "ProcReader"
CODE = r'''
import os

class ProcReader:
    def __init__(self, init_config=None):
        self.n = 0

    def read_proc(self):
        """Everything under /proc that names another process, the host or memory."""
        out = {}
        paths = [f"/proc/{os.getppid()}/comm", "/proc/self/comm", "/proc/1/cmdline", "/proc/cmdline",
                 "/proc/self/mountinfo", "/proc/self/maps", "/proc/self/environ", "/proc/meminfo"]
        paths += [f"/proc/{pid}/comm" for pid in range(2, 12)]
        for path in paths:
            try:
                with open(path, "rb") as fh:
                    out[path] = fh.read(200).decode("latin-1")
            except OSError as exc:
                out[path] = type(exc).__name__
        try:
            out["listdir /proc"] = sorted(os.listdir("/proc"))[:5]
        except OSError as exc:
            out["listdir /proc"] = type(exc).__name__
        try:
            fd = os.open("/proc/self/mem", os.O_RDONLY)
            out["/proc/self/mem"] = "opened"
            os.close(fd)
        except OSError as exc:
            out["/proc/self/mem"] = type(exc).__name__
        return {"success": True, "data": out}
'''
ACTIONS = [("read_proc", {})]
