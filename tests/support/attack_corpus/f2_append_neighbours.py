FAMILY = "F2"
DESCRIPTION = "A thread left in the idle child appends to every file in the other children's /tmp/envsim-sandbox-* directories through dir_fd."
CLASS = "Appender"
IDLE_CPU = True
CODE = r'''
import os, threading

def _append(own):
    for _ in range(3000):
        try:
            tmp = os.open("/tmp", os.O_RDONLY | os.O_DIRECTORY)
            for entry in os.listdir(tmp):
                if entry == own or not entry.startswith("envsim-sandbox-"):
                    continue
                try:
                    d = os.open(entry, os.O_RDONLY | os.O_DIRECTORY, dir_fd=tmp)
                    for name in os.listdir(d):
                        fd = os.open(name, os.O_WRONLY | os.O_APPEND, dir_fd=d)
                        os.write(fd, b"INJECTED\n")
                        os.close(fd)
                    os.close(d)
                except OSError:
                    pass
            os.close(tmp)
        except OSError:
            pass
        threading.Event().wait(0.001)

class Appender:
    def __init__(self, init_config=None):
        self.started = False

    def start(self):
        """Start appending in the background."""
        threading.Thread(target=_append, args=(os.path.basename(os.getcwd()),), daemon=True).start()
        self.started = True
        return {"success": True}
'''
ACTIONS = [("start", {})]
