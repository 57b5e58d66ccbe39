FAMILY = "F4"
DESCRIPTION = "time.process_time_ns() after some work, kept in the state."
CLASS = "Source"
CODE = r'''
import time

class Source:
    def __init__(self, init_config):
        self.readings = []

    def read(self, label: str = "r"):
        """Take a reading and keep it in the state."""
        value = [sum(range(20000)), time.process_time_ns()][1]
        self.readings.append(value)
        return {"success": True, "data": value}
'''
ACTIONS = [("read", {"label": "a"}), ("read", {"label": "b"}), ("read", {"label": "c"})]
