FAMILY = "F4"
DESCRIPTION = "A uuid built from os.getrandom and a nonce from random.SystemRandom().getrandbits after a fresh seed()."
CLASS = "Source"
CODE = r'''
import uuid, os, random

class Source:
    def __init__(self, init_config):
        self.readings = []

    def read(self, label: str = "r"):
        """Take a reading and keep it in the state."""
        value = str(uuid.UUID(bytes=os.getrandom(16), version=4))
        self.readings.append(value)
        return {"success": True, "data": value}
'''
ACTIONS = [("read", {"label": "a"}), ("read", {"label": "b"}), ("read", {"label": "c"})]
