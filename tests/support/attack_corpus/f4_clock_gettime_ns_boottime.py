FAMILY = "F4"
DESCRIPTION = "time.clock_gettime_ns(CLOCK_BOOTTIME) / CLOCK_MONOTONIC_RAW (monotonic_ns is frozen; these are not)."
CLASS = "Source"
CODE = r'''
import time

class Source:
    def __init__(self, init_config):
        self.readings = []

    def read(self, label: str = "r"):
        """Take a reading and keep it in the state."""
        value = [time.clock_gettime_ns(time.CLOCK_BOOTTIME), time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW)]
        self.readings.append(value)
        return {"success": True, "data": value}
'''
ACTIONS = [("read", {"label": "a"}), ("read", {"label": "b"}), ("read", {"label": "c"})]
