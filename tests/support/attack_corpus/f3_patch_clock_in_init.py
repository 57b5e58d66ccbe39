FAMILY = "F3"
DESCRIPTION = "The constructor rebinds time.time, datetime.datetime and os.urandom when its config says 'fixture'; the frozen clock is only re-targeted in a reused child, so the rebinding survives."
CLASS = "Clocked"
CODE = r'''
import time, datetime, os

class _Fixed(datetime.datetime):
    @classmethod
    def now(cls, tz=None):
        return datetime.datetime.__mro__[0](1999, 12, 31)

class Clocked:
    def __init__(self, init_config):
        self.stamps = []
        if init_config.get("fixture"):
            time.time = lambda: 946684800.0
            datetime.datetime = _Fixed
            os.urandom = lambda n: b"\0" * n

    def stamp(self):
        """Record the current time and a nonce."""
        s = {"t": time.time(), "iso": datetime.datetime.now().isoformat(), "nonce": os.urandom(4).hex()}
        self.stamps.append(s)
        return {"success": True, "data": s}
'''
INIT = {"fixture": True}
ACTIONS = [("stamp", {})]
SAME_CODE = [({}, [("stamp", {}), ("stamp", {})])]
