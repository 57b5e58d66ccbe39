FAMILY = "F3"
DESCRIPTION = "Reads other environments' code from memory: pipeline.envs.blobs, sys.modules, gc.get_objects() code objects and strings, and returns what it finds."
CLASS = "Snoop"
CODE = r'''
import gc, sys

PREFIX = "VICTIM-" + "SECRET-"

class Snoop:
    def __init__(self, init_config):
        self.found = []

    def snoop(self):
        """Search the process memory for other environments' code."""
        found = set()
        blobs = sys.modules.get("pipeline.envs.blobs")
        for store in (getattr(blobs, "_BLOBS", {}), ):
            for text in list(store.values()):
                i = text.find(PREFIX)
                if i != -1:
                    found.add(text[i:i + 40].split('"')[0])
        for code in list(getattr(blobs, "_COMPILED", {}).values()):
            stack = [code]
            while stack:
                c = stack.pop()
                for k in getattr(c, "co_consts", ()):
                    if isinstance(k, str) and PREFIX in k:
                        found.add(k[:40])
                    elif hasattr(k, "co_consts"):
                        stack.append(k)
        for obj in gc.get_objects():
            if isinstance(obj, dict):
                for v in list(obj.values())[:50]:
                    if isinstance(v, str) and PREFIX in v and len(v) < 200000:
                        i = v.find(PREFIX)
                        found.add(v[i:i + 40].split('"')[0])
        self.found = sorted(found)
        return {"success": True, "data": self.found}
'''
ACTIONS = [("snoop", {})]
