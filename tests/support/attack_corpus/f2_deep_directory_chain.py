FAMILY = "F2"
DESCRIPTION = "Leaves a 1,500-deep directory chain with a large file at its bottom: a recursive cleanup dies of RecursionError."
CLASS = "DeepChain"
CODE = r'''
import os

class DeepChain:
    def __init__(self, init_config=None):
        self.depth = 0

    def dig(self, depth: int = 1500):
        """mkdir + chdir, depth times; a 32 MiB file at the bottom."""
        start = os.getcwd()
        for _ in range(depth):
            os.mkdir("d")
            os.chdir("d")
            self.depth += 1
        with open("bottom.bin", "wb") as fh:
            fh.write(b"\0" * (32 << 20))
        os.chdir(start)
        return {"success": True, "data": self.depth}

    def scratch(self, kib: int = 4096):
        """An innocent scenario of the same code: write a scratch file."""
        with open("scratch.bin", "wb") as fh:
            fh.write(b"s" * (kib * 1024))
        return {"success": True, "data": os.path.getsize("scratch.bin")}
'''
ACTIONS = [("dig", {}), ("dig", {"depth": 200})]
SAME_CODE = [({}, [("scratch", {}), ("scratch", {"kib": 1024})])]
