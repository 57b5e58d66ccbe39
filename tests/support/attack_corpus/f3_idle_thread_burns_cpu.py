FAMILY = "F3"
DESCRIPTION = "Leaves a busy thread in the reused child: it burns CPU while no call is in flight and counts into a module that later trajectories of the code read."
CLASS = "Burner"
IDLE_CPU = True
CODE = r'''
import threading, sys

def _burn():
    box = sys.modules.setdefault("burner_box", type(sys)("burner_box"))
    box.n = 0
    while True:
        box.n += 1

class Burner:
    def __init__(self, init_config):
        self.seen = None

    def ignite(self):
        """Start the busy thread."""
        threading.Thread(target=_burn, daemon=True).start()
        return {"success": True}

    def peek(self):
        """Report whether a burner box exists in this process."""
        self.seen = "burner_box" in sys.modules
        return {"success": True, "data": self.seen}
'''
ACTIONS = [("ignite", {})]
SAME_CODE = [({}, [("peek", {}), ("peek", {})])]
