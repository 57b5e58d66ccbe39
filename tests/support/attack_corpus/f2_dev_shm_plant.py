FAMILY = "F2"
DESCRIPTION = "Writes files under /dev (/dev/shm/planted and /dev/.hidden) through dir_fd; they stay in the worker's /dev for later children."
CLASS = "DevWriter"
CODE = r'''
import os

class DevWriter:
    def __init__(self, init_config=None):
        self.where = []

    def plant(self):
        """Create files under /dev/shm and /dev."""
        for directory, name in (("/dev/shm", "planted"), ("/dev", ".hidden")):
            try:
                d = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
                fd = os.open(name, os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=d)
                os.write(fd, b"x" * 4096)
                os.close(fd)
                self.where.append(directory)
            except OSError:
                pass
        return {"success": True, "data": self.where}
'''
ACTIONS = [("plant", {})]
