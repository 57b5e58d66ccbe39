from tests.support.attack_corpus._refused import refused_except

FAMILY = "F1"
DESCRIPTION = "chmods the instance's /tmp, the worker's directory of children and its own directory (the worker's next mkdir would fail)."
#: a child may change the modes and times of its own files (what the language runtime needs: shutil.copy2, shelve);
#: everything else it names must be refused
check = refused_except({".", "..", "own.txt", "fchmod", "utime"})
CLASS = "ModeChanger"
CODE = r'''
import os

class ModeChanger:
    def __init__(self, init_config=None):
        self.n = 0

    def chmod_all(self):
        """chmod every directory it can name, and its own file."""
        out = {}
        with open("own.txt", "w") as fh:
            fh.write("x")
        for path in ("/tmp", "/tmp/work", "..", ".", "own.txt", "/dev/shm"):
            try:
                os.chmod(path, 0)
                out[path] = "changed"
            except OSError as exc:
                out[path] = type(exc).__name__
        for name, call in (("fchmod", lambda: os.fchmod(os.open(".", os.O_RDONLY), 0)),
                           ("chown", lambda: os.chown("own.txt", 0, 0)),
                           ("utime", lambda: os.utime("own.txt", (0, 0)))):
            try:
                call()
                out[name] = "changed"
            except OSError as exc:
                out[name] = type(exc).__name__
        return {"success": True, "data": out}
'''
ACTIONS = [("chmod_all", {}), ("chmod_all", {})]
