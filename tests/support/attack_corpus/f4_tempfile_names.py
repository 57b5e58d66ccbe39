FAMILY = "F4"
DESCRIPTION = "tempfile.mkstemp()'s random file name (its own Random())."
CLASS = "Source"
CODE = r'''
import tempfile, os

class Source:
    def __init__(self, init_config):
        self.readings = []

    def read(self, label: str = "r"):
        """Take a reading and keep it in the state."""
        value = os.path.basename(tempfile.mkstemp(dir='.')[1])
        self.readings.append(value)
        return {"success": True, "data": value}
'''
ACTIONS = [("read", {"label": "a"}), ("read", {"label": "b"}), ("read", {"label": "c"})]
