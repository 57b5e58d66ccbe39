FAMILY = "F5"
DESCRIPTION = "Lone surrogates ('\\ud800', '\\udfff') in an observation, a state key and a state value."
CLASS = "Surrogates"
CODE = r'''
class Surrogates:
    def __init__(self, init_config):
        self.names = {}

    def name(self, n: int):
        """Store a name with a lone surrogate."""
        bad = chr(0xD800 + n) + "x" + chr(0xDFFF)
        self.names[bad] = bad
        return {"success": True, "data": bad}

    def echo(self):
        """Return a lone surrogate in the observation only."""
        return "\ud83d broken"
'''
ACTIONS = [("echo", {}), ("name", {"n": 1}), ("name", {"n": 2})]
