FAMILY = "F5"
DESCRIPTION = "A 900-deep nested list in the state, a 1200-deep dict in the observation and a 60 MB string return value."
CLASS = "Deep"
CODE = r'''
class Deep:
    def __init__(self, init_config):
        self.tree = []

    def nest(self, depth: int):
        """Keep a nested list of the given depth in the state."""
        t = []
        for _ in range(depth):
            t = [t]
        self.tree = t
        return {"success": True, "data": depth}

    def nest_obs(self, depth: int):
        """Return a nested dict of the given depth."""
        t = {}
        for _ in range(depth):
            t = {"k": t}
        return {"success": True, "data": t}

    def huge(self, mb: int):
        """Return an enormous string."""
        return "y" * (mb << 20)
'''
ACTIONS = [("nest", {"depth": 900}), ("nest_obs", {"depth": 1200}), ("huge", {"mb": 60}), ("nest", {"depth": 3})]
