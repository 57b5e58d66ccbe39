"""Innocent victim environments: deterministic under the sandbox's frozen clock and seeds, and built to
*show* an attack in their labels — they import standard modules the worker has not preloaded (a planted
module would run), write and re-read their own files, draw seeded ids, and report what they can see of
the shared ``/tmp`` and ``/dev/shm`` and their own file-size limit. Their code holds a secret marker
that no other environment may ever observe."""

from __future__ import annotations

from pipeline.core.trajectory import Action, Trajectory
from pipeline.envs import envscaler

# never written out in full in an attacker module: the attackers search for the prefix
SECRET = "VICTIM-SECRET-" + "c0unter-91c2"
MARKER = "ledger-ok-5d1e7a"  # a string constant in the victim's compiled code

LEDGER_CODE = '''
import os, uuid, random, json, resource

MARKER = "ledger-ok-5d1e7a"


class VictimLedger:
    """Entries with seeded ids; statistics through modules imported lazily."""

    def __init__(self, init_config):
        self.entries = list(init_config.get("entries", []))
        self.notes_seen = ""

    def add(self, amount: int):
        """Add an entry."""
        entry = {"id": str(uuid.uuid4()), "amount": amount, "ref": random.randint(1, 10**6)}
        self.entries.append(entry)
        return {"success": True, "data": entry, "marker": MARKER}

    def stats(self):
        """Statistics of the amounts (imports statistics, difflib, shlex, pprint, html, heapq lazily)."""
        import statistics, difflib, shlex, pprint, html, heapq
        amounts = [e["amount"] if isinstance(e, dict) else e for e in self.entries] or [0]
        data = {"mean": statistics.mean(amounts), "median": statistics.median(amounts),
                "ratio": difflib.SequenceMatcher(None, "ledger", "ledgers").ratio(),
                "quoted": shlex.quote("a b"), "pretty": pprint.pformat({"b": 1, "a": 2}),
                "escaped": html.escape("<x>"), "top": heapq.nlargest(2, amounts),
                "files": sorted(m.__file__ or "" for m in (statistics, difflib, shlex, pprint, html, heapq))}
        return {"success": True, "data": data, "marker": MARKER}

    def note(self, text: str):
        """Append a line to notes.txt in the working directory."""
        with open("notes.txt", "a") as fh:
            fh.write(text + "\\n")
        return {"success": True}

    def work(self, rounds: int = 200000):
        """Busy work, then re-read notes.txt."""
        total = 0
        for i in range(rounds):
            total += i % 7
        with open("notes.txt") as fh:
            self.notes_seen = fh.read()
        return {"success": True, "data": {"total": total, "notes": self.notes_seen}}

    def look(self):
        """What this process sees of the shared directories and its own limits."""
        try:
            tmp = sorted(n for n in os.listdir("/tmp") if not n.startswith("envsim-sandbox-"))
        except OSError as exc:  # Landlock: only its own directory of /tmp is readable
            tmp = [type(exc).__name__]
        try:
            shm = sorted(os.listdir("/dev/shm"))
        except OSError as exc:
            shm = [type(exc).__name__]
        own = sorted(os.listdir("."))
        limits = {n: resource.getrlimit(getattr(resource, n)) for n in ("RLIMIT_FSIZE", "RLIMIT_NOFILE", "RLIMIT_NPROC")}
        return {"success": True, "data": {"tmp": tmp, "shm": shm, "own": own, "limits": limits,
                                          "json": json.dumps({"b": [1, 2], "a": None}, sort_keys=True)}}

    def big_note(self, kib: int = 256):
        """Write a larger scratch file (fails when /tmp is full)."""
        with open("scratch.bin", "wb") as fh:
            fh.write(b"v" * (kib * 1024))
        return {"success": True, "data": os.path.getsize("scratch.bin")}
'''

COUNTER_CODE = '''
import uuid, datetime, json

SECRET = "VICTIM-SECRET-" "c0unter-91c2"


class VictimCounter:
    """A till and a stock table (the secret above must never reach another environment)."""

    def __init__(self, init_config):
        self.stock = dict(init_config.get("stock", {}))
        self.till = 0
        self.receipts = []

    def sell(self, item: str, qty: int):
        """Sell units of an item."""
        if self.stock.get(item, 0) < qty:
            return {"success": False, "error": "not enough stock"}
        self.stock[item] -= qty
        self.till += 2 * qty
        receipt = {"id": str(uuid.uuid4()), "at": datetime.datetime.now().isoformat(), "item": item,
                   "line": json.dumps({"item": item, "qty": qty}, sort_keys=True), "n": len(self.receipts)}
        self.receipts.append(receipt)
        return {"success": True, "data": receipt}

    def count(self):
        """Kinds of items in stock."""
        return {"success": True, "data": len(sorted(self.stock))}
'''

VICTIM_CODE = {"victim_ledger": ("VictimLedger", LEDGER_CODE), "victim_counter": ("VictimCounter", COUNTER_CODE)}
VICTIM_INIT = {"victim_ledger": {"entries": [3, 5]}, "victim_counter": {"stock": {"apple": 5, "pear": 2}}}

LEDGER_ACTIONS = [("look", {}), ("add", {"amount": 7}), ("note", {"text": "first"}), ("work", {}),
                  ("stats", {}), ("big_note", {"kib": 256}), ("note", {"text": "second"}), ("work", {}), ("look", {})]
COUNTER_ACTIONS = [("sell", {"item": "apple", "qty": 2}), ("count", {}), ("sell", {"item": "pear", "qty": 1}),
                   ("sell", {"item": "pear", "qty": 5})]


def spec(env_id: str, code: str, class_name: str, init: dict):
    item = envscaler.parse_env_item(env_id, {"env_class_name": class_name, "env_class_code": code})
    assert not isinstance(item, envscaler.TaskIssue) and not item.problems, item
    return item.spec(init)


def trajectory(trajectory_id: str, env_spec, actions) -> Trajectory:
    return Trajectory(trajectory_id, trajectory_id.rsplit("/", 1)[0], env_spec,
                      tuple(Action(name, dict(args), turn=i) for i, (name, args) in enumerate(actions)))


def victim_trajectories() -> dict[str, Trajectory]:
    """The victims of every mixed run, by id (the ids seed their frozen clock: fixed)."""
    ledger = spec("victim_ledger", LEDGER_CODE, "VictimLedger", VICTIM_INIT["victim_ledger"])
    counter = spec("victim_counter", COUNTER_CODE, "VictimCounter", VICTIM_INIT["victim_counter"])
    return {
        "victim/ledger/0": trajectory("victim/ledger/0", ledger, LEDGER_ACTIONS),
        "victim/counter/0": trajectory("victim/counter/0", counter, COUNTER_ACTIONS),
        "victim/ledger/1": trajectory("victim/ledger/1", ledger, LEDGER_ACTIONS),
    }
