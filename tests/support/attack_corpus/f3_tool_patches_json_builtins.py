FAMILY = "F3"
DESCRIPTION = "A tool call replaces json.dumps, builtins.sorted/len and str.format-free helpers; later trajectories of the same code in the child use them."
CLASS = "Formatter"
CODE = r'''
import json, builtins

class Formatter:
    def __init__(self, init_config):
        self.lines = []

    def poison(self):
        """Patch json.dumps and builtins."""
        json.dumps = lambda *a, **k: '"poisoned"'
        builtins.sorted = lambda it, *a, **k: list(it)[::-1]
        builtins.len = lambda o: 42
        builtins.max = lambda *a, **k: -1
        return {"success": True}

    def render(self, items: list):
        """Render items."""
        line = json.dumps({"items": sorted(items), "n": len(items), "top": max(items)}, sort_keys=True)
        self.lines.append(line)
        return {"success": True, "data": line}
'''
ACTIONS = [("poison", {})]
SAME_CODE = [({}, [("render", {"items": [3, 1, 2]}), ("render", {"items": [9, 8]})])]
