FAMILY = "F4"
DESCRIPTION = "id(object()) and hash(object()): heap addresses, different in a reused child and a fresh one."
CLASS = "Source"
CODE = r'''
import gc

class Source:
    def __init__(self, init_config):
        self.readings = []

    def read(self, label: str = "r"):
        """Take a reading and keep it in the state."""
        value = [id(object()) % 1000003, hash(object()) % 1000003, len(gc.get_objects())]
        self.readings.append(value)
        return {"success": True, "data": value}
'''
ACTIONS = [("read", {"label": "a"}), ("read", {"label": "b"}), ("read", {"label": "c"})]
