FAMILY = "F2"
DESCRIPTION = "Fills the instance's /tmp through a write-only (mode 300) directory and leaves a mode-000 one: a cleanup that cannot list them leaves /tmp full for the next trajectories."
CLASS = "HiddenFiller"
CODE = r'''
import os

class HiddenFiller:
    def __init__(self, init_config=None):
        self.written = 0

    def fill(self, megabytes: int = 400):
        """Write files into a directory it then cannot list; leave a mode-000 one too."""
        os.mkdir("hidden", 0o300)
        os.mkdir("locked", 0o000)
        chunk = b"\0" * (1 << 20)
        for i in range(megabytes // 32 + 1):
            try:
                with open(f"hidden/f{i}", "wb") as fh:
                    for _ in range(32):
                        fh.write(chunk)
                        self.written += 1
            except OSError:
                break
        return {"success": True, "data": self.written > 0}

    def scratch(self, kib: int = 4096):
        """An innocent scenario of the same code: write a scratch file."""
        with open("scratch.bin", "wb") as fh:
            fh.write(b"s" * (kib * 1024))
        return {"success": True, "data": os.path.getsize("scratch.bin")}
'''
ACTIONS = [("fill", {})]
SAME_CODE = [({}, [("scratch", {}), ("scratch", {"kib": 8192})]), ({"n": 1}, [("scratch", {})])]
