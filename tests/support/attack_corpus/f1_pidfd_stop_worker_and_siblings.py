FAMILY = "F1"
DESCRIPTION = "pidfd_open + pidfd_send_signal(SIGSTOP) to every warm sibling child and then to the worker itself (pthread_kill cannot reach other processes, ctypes tgkill is refused)."
CLASS = "Stopper"
CODE = r'''
import os, signal

class Stopper:
    def __init__(self, init_config=None):
        self.tries = {}

    def stop_siblings(self):
        """SIGSTOP every other process but the worker and pid 1."""
        out = {}
        for p in os.listdir("/proc"):
            if not p.isdigit() or int(p) in (os.getpid(), os.getppid(), 1):
                continue
            try:
                fd = os.pidfd_open(int(p))
                signal.pidfd_send_signal(fd, signal.SIGSTOP)
                out[p] = "stopped"
            except OSError as exc:
                out[p] = type(exc).__name__
        self.tries = out
        return {"success": True, "data": len(out)}

    def stop_worker(self):
        """SIGSTOP the worker through a pidfd."""
        fd = os.pidfd_open(os.getppid())
        signal.pidfd_send_signal(fd, signal.SIGSTOP)
        return {"success": True}
'''
ACTIONS = [("stop_siblings", {}), ("stop_worker", {})]


def check(results, limits):
    return [f"{r['trajectory_id']}#{s['step_index']}: the child stopped its worker ({s['error_message'][:120]})"
            for r in results for s in r["steps"] if "stopped or wedged" in (s.get("error_message") or "")]
