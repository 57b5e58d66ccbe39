FAMILY = "F1"
DESCRIPTION = "Signals other pids through signal.pthread_kill (tgkill) with foreign tids and pidfd SIGSTOP of the worker itself."
CLASS = "Stopper"
CODE = r'''
import os, signal

class Stopper:
    def __init__(self, init_config=None):
        self.tries = {}

    def tgkill_everyone(self):
        """pthread_kill with the tids of every other task visible."""
        out = {}
        for p in os.listdir("/proc"):
            if not p.isdigit() or int(p) == os.getpid():
                continue
            try:
                for tid in os.listdir(f"/proc/{p}/task"):
                    try:
                        signal.pthread_kill(int(tid), signal.SIGKILL)
                        out[tid] = "sent"
                    except OSError as exc:
                        out[tid] = type(exc).__name__
            except OSError:
                pass
        self.tries = out
        return {"success": True, "data": out}

    def stop_worker(self):
        """SIGSTOP then SIGCONT-less: the worker freezes if allowed."""
        fd = os.pidfd_open(os.getppid())
        signal.pidfd_send_signal(fd, signal.SIGSTOP)
        return {"success": True}
'''
ACTIONS = [("tgkill_everyone", {}), ("stop_worker", {})]
