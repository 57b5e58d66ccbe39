FAMILY = "F5"
DESCRIPTION = "Tools return and store float('inf'), -inf, nan and 10**400 in observations and in the state."
CLASS = "Numbers"
CODE = r'''
class Numbers:
    def __init__(self, init_config):
        self.values = {}

    def weird(self, which: str):
        """Return (and keep) a value that JSON cannot hold plainly."""
        value = {"inf": float("inf"), "ninf": float("-inf"), "nan": float("nan"), "big": 10 ** 400, "neg": -(10 ** 401)}[which]
        self.values[which] = value
        return {"success": True, "data": value}
'''
ACTIONS = [("weird", {"which": w}) for w in ("inf", "ninf", "nan", "big", "neg")]
