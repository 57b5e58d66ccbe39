"""A small corpus in EnvScaler's exact released format, written to disk as a user would have it."""

import json
from pathlib import Path

COUNTER_CODE = '''
class CounterShop:
    """A tiny shop: a till and a stock table."""

    def __init__(self, init_config):
        self.stock = init_config.get("stock", {})
        if not isinstance(self.stock, dict):
            raise ValueError("stock must be a mapping of item -> units")
        self.till = init_config.get("till", 0)
        self._log = []

    def sell(self, item: str, qty: int):
        """Sell units of an item.

        Args:
            item (str): Item name.
            qty (int): Units sold.
        """
        if item not in self.stock:
            return {"success": False, "error": f"unknown item {item}"}
        if self.stock[item] < qty:
            return {"success": False, "error": "not enough stock"}
        self.stock[item] -= qty
        self.till += qty * 2
        self._log.append(item)
        return {"success": True, "data": {"left": self.stock[item]}}

    def count(self):
        """How many kinds of items are stocked."""
        return {"success": True, "data": len(self.stock)}
'''

HOSTILE_CODE = '''
import os, socket, time
CALLS = []  # module-level state: must never leak between trajectories

class Hostile:
    def __init__(self, init_config=None):
        self.value = 0

    def bump(self):
        """Increment a module-level list and the instance value."""
        CALLS.append(1)
        self.value = len(CALLS)
        return {"success": True, "data": self.value}

    def hang(self):
        """Never returns."""
        while True:
            time.sleep(0.01)

    def crash(self):
        """Kills its own process."""
        os._exit(3)

    def segfault(self):
        """Dies of a signal."""
        import faulthandler
        faulthandler._sigsegv()

    def eat_memory(self):
        """Allocates until it cannot."""
        blocks = []
        while True:
            blocks.append(bytearray(50 * 1024 * 1024))

    def phone_home(self):
        """Opens a network connection."""
        socket.create_connection(("127.0.0.1", 9), timeout=1)
        return {"success": True}

    def fork_bomb(self):
        """Tries to spawn processes."""
        while True:
            os.fork()

    def shell_out(self):
        """Runs a shell command."""
        os.system("echo hi > /tmp/envsim-owned")
        return {"success": True}

    def write_outside(self):
        """Writes a file outside its sandbox directory."""
        with open("/tmp/envsim-escape.txt", "w") as fh:
            fh.write("x")
        return {"success": True}

    def write_inside(self):
        """Writes a scratch file in its working directory (allowed)."""
        with open("scratch.txt", "w") as fh:
            fh.write("ok")
        self.value += 1
        return {"success": True, "data": os.path.exists("scratch.txt")}

    def flood(self):
        """Prints without end."""
        while True:
            print("spam " * 100)

    def chatty(self):
        """Prints a little and succeeds."""
        print("hello from env code")
        return {"success": True}
'''

ITEMS = {
    "counter_shop": {
        "env_class_name": "CounterShop",
        "env_class_code": COUNTER_CODE,
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "sell",
                    "description": "Sell units",
                    "parameters": {
                        "type": "object",
                        "properties": {"item": {"type": "string"}, "qty": {"type": "integer"}},
                        "required": ["item", "qty"],
                    },
                },
            },
            {
                "type": "function",
                "function": {
                    "name": "count",
                    "description": "Count kinds",
                    "parameters": {"type": "object", "properties": {}},
                },
            },
        ],
        "environment_introduction": "A tiny shop.",
        "constraints_rules": "Cannot sell more than in stock.",
    },
    "hostile": {  # no "tools": derived from the class
        "env_class_name": "Hostile",
        "env_class_code": HOSTILE_CODE,
        "environment_introduction": "Misbehaving code.",
        "constraints_rules": "",
    },
    "broken_syntax": {
        "env_class_name": "X",
        "env_class_code": "class X:\n    def f(self:\n        pass\n",
        "tools": [],
    },
    "missing_class": {
        "env_class_name": "Ghost",
        "env_class_code": "class Other:\n    def f(self):\n        return 1\n",
    },
    "bad_schema": {
        "env_class_name": "CounterShop",
        "env_class_code": COUNTER_CODE,
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "sell",
                    "parameters": {
                        "type": "object",
                        "properties": {"item": {"type": "string"}, "quantity": {"type": "integer"}},
                    },
                },
            },
            {"type": "function", "function": {"name": "count", "parameters": {"type": "object", "properties": {}}}},
        ],
    },
}

SCENARIOS = [
    {
        "task_id": "shop-1",
        "env_id": "counter_shop",
        "env_class_name": "CounterShop",
        "init_config": {"stock": {"apple": 3, "pear": 1}, "till": 0},
        "task": "Sell fruit.",
        "checklist_with_func": [{"check": "till > 0"}],
    },
    {
        "task_id": "shop-ctor-raises",
        "env_id": "counter_shop",
        "env_class_name": "CounterShop",
        "init_config": {"stock": ["not", "a", "dict"]},
        "task": "Broken config.",
    },
    {"task_id": "shop-unknown-env", "env_id": "no_such_env", "env_class_name": "Nope", "init_config": {}, "task": "?"},
    {"task_id": "hostile-1", "env_id": "hostile", "env_class_name": "Hostile", "init_config": {}, "task": "Misbehave."},
]


def write_corpus(directory: Path) -> tuple[Path, Path]:
    env_file = directory / "191_env_metadata.json"
    scen_file = directory / "scenarios.json"
    env_file.write_text(json.dumps(ITEMS, indent=1))
    scen_file.write_text(json.dumps(SCENARIOS, indent=1))
    return env_file, scen_file
