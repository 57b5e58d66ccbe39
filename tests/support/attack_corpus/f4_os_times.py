FAMILY = "F4"
DESCRIPTION = "os.times() (user, system, elapsed) as a list."
CLASS = "Source"
CODE = r'''
import os

class Source:
    def __init__(self, init_config):
        self.readings = []

    def read(self, label: str = "r"):
        """Take a reading and keep it in the state."""
        value = list(os.times())
        self.readings.append(value)
        return {"success": True, "data": value}
'''
ACTIONS = [("read", {"label": "a"}), ("read", {"label": "b"}), ("read", {"label": "c"})]
