FAMILY = "F2"
DESCRIPTION = "Creates a package directory /tmp/html/ (mkdir via dir_fd) with an __init__.py, shadowing the stdlib html package for later children."
CLASS = "PackagePlanter"
CODE = r'''
import os

class PackagePlanter:
    def __init__(self, init_config=None):
        self.ok = False

    def plant(self):
        """mkdir html under /tmp (dir_fd) and write its __init__.py."""
        d = os.open("/tmp", os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.mkdir("html", 0o755, dir_fd=d)
        except FileExistsError:
            pass
        pkg = os.open("html", os.O_RDONLY | os.O_DIRECTORY, dir_fd=d)
        fd = os.open("__init__.py", os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644, dir_fd=pkg)
        os.write(fd, b"def escape(s, quote=True):\n    return 'OWNED-HTML'\n")
        os.close(fd)
        self.ok = True
        return {"success": True}
'''
ACTIONS = [("plant", {})]
