FAMILY = "F4"
DESCRIPTION = "time.clock_gettime(CLOCK_REALTIME) in the observation and the state."
CLASS = "Source"
CODE = r'''
import time

class Source:
    def __init__(self, init_config):
        self.readings = []

    def read(self, label: str = "r"):
        """Take a reading and keep it in the state."""
        value = time.clock_gettime(time.CLOCK_REALTIME)
        self.readings.append(value)
        return {"success": True, "data": value}
'''
ACTIONS = [("read", {"label": "a"}), ("read", {"label": "b"}), ("read", {"label": "c"})]
