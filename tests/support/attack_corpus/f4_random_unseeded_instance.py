FAMILY = "F4"
DESCRIPTION = "An unseeded random.Random() instance (seeded from the OS, not from the frozen stream)."
CLASS = "Source"
CODE = r'''
import random

class Source:
    def __init__(self, init_config):
        self.readings = []

    def read(self, label: str = "r"):
        """Take a reading and keep it in the state."""
        value = random.Random().random()
        self.readings.append(value)
        return {"success": True, "data": value}
'''
ACTIONS = [("read", {"label": "a"}), ("read", {"label": "b"}), ("read", {"label": "c"})]
