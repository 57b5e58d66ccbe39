FAMILY = "F3"
DESCRIPTION = "A scenario whose init_config asks the constructor to 'pin' uuid.uuid4 and random.randint; a later scenario of the same code in the reused child gets the pinned values."
CLASS = "Orders"
CODE = r'''
import uuid, random

class Orders:
    def __init__(self, init_config):
        self.orders = []
        if init_config.get("pin_ids"):
            uuid.uuid4 = lambda: uuid.UUID(int=7)
            random.randint = lambda a, b: a
            random.choice = lambda seq: seq[0]

    def order(self, item: str):
        """Place an order with a fresh id and ticket."""
        o = {"id": str(uuid.uuid4()), "ticket": random.randint(1, 10**9), "desk": random.choice(["a", "b", "c", "d"]), "item": item}
        self.orders.append(o)
        return {"success": True, "data": o}
'''
INIT = {"pin_ids": True}
ACTIONS = [("order", {"item": "x"})]
SAME_CODE = [({}, [("order", {"item": "apple"}), ("order", {"item": "pear"})]),
             ({"note": "plain"}, [("order", {"item": "fig"})])]
