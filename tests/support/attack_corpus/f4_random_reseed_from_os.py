FAMILY = "F4"
DESCRIPTION = "random.seed() with no argument reseeds the global generator from the OS before drawing."
CLASS = "Source"
CODE = r'''
import random

class Source:
    def __init__(self, init_config):
        self.readings = []

    def read(self, label: str = "r"):
        """Take a reading and keep it in the state."""
        value = (random.seed(), random.randint(0, 10**12))[1]
        self.readings.append(value)
        return {"success": True, "data": value}
'''
ACTIONS = [("read", {"label": "a"}), ("read", {"label": "b"}), ("read", {"label": "c"})]
