FAMILY = "F4"
DESCRIPTION = "The text of /proc/uptime and /proc/self/stat's start time."
CLASS = "Source"
CODE = r'''


class Source:
    def __init__(self, init_config):
        self.readings = []

    def read(self, label: str = "r"):
        """Take a reading and keep it in the state."""
        value = [open('/proc/uptime').read().split()[0], open('/proc/self/stat').read().split()[21]]
        self.readings.append(value)
        return {"success": True, "data": value}
'''
ACTIONS = [("read", {"label": "a"}), ("read", {"label": "b"}), ("read", {"label": "c"})]
