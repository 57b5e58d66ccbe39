FAMILY = "F6"
DESCRIPTION = "An environment id with '|' characters that break Markdown tables."
ENV_ID = "shelf|999|fake|cells"
CLASS = "Shelf"
CODE = r'''
class Shelf:
    def __init__(self, init_config):
        self.items = {"a": 1}

    def put(self, name: str, qty: int):
        """Put items on the shelf."""
        if qty <= 0:
            return {"success": False, "error": "qty must be positive"}
        self.items[name] = self.items.get(name, 0) + qty
        return {"success": True, "data": self.items[name]}

    def list_items(self):
        """List the shelf."""
        return {"success": True, "data": sorted(self.items)}
'''
ACTIONS = [("put", {"name": "b", "qty": 2}), ("list_items", {}), ("put", {"name": "c", "qty": 0}), ("put", {"name": "b", "qty": 1})]
