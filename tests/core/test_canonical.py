import datetime as dt
import enum
import math
from decimal import Decimal

import pytest

from pipeline.core.canonical import canonical_json, canonicalize, state_hash, stored_json, without_addresses


class Node:
    def __init__(self, name, parent=None):
        self.name = name
        self.parent = parent
        self.children = {}
        self._private = "hidden"


def test_plain_json_is_unchanged_keeps_its_order_and_hashes_sorted():
    state = {"b": [1, 2.5, "x", None, True], "a": {"z": 1, "y": {}}}
    canon = canonicalize(state)
    assert canon == state
    assert list(canon) == ["b", "a"] and list(canon["a"]) == ["z", "y"]  # the order the environment holds
    assert stored_json(canon) == '{"b":[1,2.5,"x",null,true],"a":{"z":1,"y":{}}}'
    assert canonical_json(canon) == '{"a":{"y":{},"z":1},"b":[1,2.5,"x",null,true]}'  # what is hashed
    assert state_hash(canon) == state_hash(canonicalize({"a": {"y": {}, "z": 1}, "b": state["b"]}))


class Status(str, enum.Enum):
    ACTIVE = "Active"
    SUSPENDED = "Suspended"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 3


class Access(enum.Flag):
    READ = 1
    WRITE = 2


class Pair(enum.Enum):
    ORIGIN = (0, 0)


def test_enum_members_are_their_values_whatever_they_mix_in_keys_included():
    canon = canonicalize(
        {
            "status": Status.SUSPENDED,
            "level": Level.HIGH,
            "access": Access.READ | Access.WRITE,
            "where": Pair.ORIGIN,
            "counts": {Status.ACTIVE: 2, Status.SUSPENDED: 1},
            "by_level": {Level.LOW: "l", Level.HIGH: "h"},
            "by_access": {Access.WRITE: "w"},
            "clash": {Level.LOW: "enum", "1": "str"},
        }
    )
    assert canon == {
        "status": "Suspended",
        "level": 3,
        "access": 3,
        "where": [0, 0],
        "counts": {"Active": 2, "Suspended": 1},
        "by_level": {"1": "l", "3": "h"},
        "by_access": {"2": "w"},
        "clash": {"<Level>1": "enum", "1": "str"},
    }
    assert "Status." not in canonical_json(canon) and "Level." not in canonical_json(canon)


def test_key_type_clash_does_not_merge():
    canon = canonicalize({1: "int", "1": "str", 2: "two"})
    assert canon == {"1": "str", "<int>1": "int", "2": "two"}
    assert list(canon) == ["<int>1", "1", "2"]  # the mapping's own order


def test_sets_tuples_datetimes_and_special_numbers():
    canon = canonicalize(
        {
            "s": {"b", "a", "c"},
            "t": (1, (2, 3)),
            "d": dt.datetime(2024, 1, 2, 3, 4, 5),
            "day": dt.date(2024, 1, 2),
            "nan": math.nan,
            "inf": -math.inf,
            "big": 2**80,
            "dec": Decimal("1.10"),
        }
    )
    assert canon["s"] == ["a", "b", "c"]
    assert canon["t"] == [1, [2, 3]]
    assert canon["d"] == "2024-01-02T03:04:05"
    assert canon["day"] == "2024-01-02"
    assert canon["nan"] == {"$float": "nan"}
    assert canon["inf"] == {"$float": "-inf"}
    assert canon["big"] == {"$int": str(2**80)}
    assert canon["dec"] == {"$decimal": "1.10"}
    canonical_json(canon)  # must not raise (no NaN, all JSON)


def test_objects_become_public_attributes_and_back_pointers_are_cut():
    root = Node("root")
    child = Node("child", parent=root)
    root.children["child"] = child
    canon = canonicalize(root)
    # the child's parent points back to an enclosing object: dropped; the root's parent is None
    assert canon == {"children": {"child": {"children": {}, "name": "child"}}, "name": "root", "parent": None}


def test_real_cycles_in_containers_are_cut():
    a = {"name": "a"}
    a["self"] = a
    lst = [1]
    lst.append(lst)
    assert canonicalize(a) == {"name": "a", "self": {"$cycle": True}}
    assert canonicalize(lst) == [1, {"$cycle": True}]


def test_shared_references_are_not_cycles():
    shared = {"v": 1}
    assert canonicalize({"a": shared, "b": shared}) == {"a": {"v": 1}, "b": {"v": 1}}


def test_equal_states_hash_equal_regardless_of_insertion_order():
    a = {"x": {1, 2, 3}, "y": {"p": 1, "q": 2}}
    b = {"y": {"q": 2, "p": 1}, "x": {3, 2, 1}}
    assert canonical_json(canonicalize(a)) == canonical_json(canonicalize(b))
    assert state_hash(canonicalize(a)) == state_hash(canonicalize(b))


def test_bool_int_float_are_distinguished_by_hash():
    assert state_hash(canonicalize({"v": 1})) != state_hash(canonicalize({"v": True}))
    assert state_hash(canonicalize({"v": 1})) != state_hash(canonicalize({"v": 1.0}))


def test_deep_nesting_is_truncated_not_a_crash():
    deep = current = {}
    for _ in range(1000):
        current["n"] = {}
        current = current["n"]
    canon = canonicalize(deep)
    assert "$truncated" in canonical_json(canon)


@pytest.mark.parametrize("value", [b"\x00\xff", 3 + 4j])
def test_other_builtins_are_encoded(value):
    assert isinstance(canonicalize({"v": value})["v"], dict)


# -- process machinery by type, and no memory address anywhere (issue 40 item 6) --------------------------------


def _machinery_env():
    import collections
    import logging
    import queue
    import threading

    class MyQueue(queue.Queue):
        """An environment's own queue class: still a queue."""

    class Env:
        def __init__(self):
            self.logger = logging.getLogger("env.orders")
            self.logger.setLevel(logging.INFO)
            self.handler = logging.StreamHandler()
            self.jobs = queue.Queue(maxsize=5)
            self.jobs.put({"id": 1})
            self.jobs.put("two")
            self.by_priority = queue.PriorityQueue()
            for item in [(2, "b"), (1, "a")]:
                self.by_priority.put(item)
            self.simple = queue.SimpleQueue()
            self.simple.put(1)
            self.mine = MyQueue()
            self.lock = threading.Lock()
            self.rlock = threading.RLock()
            self.cond = threading.Condition()
            self.ready = threading.Event()
            self.slots = threading.Semaphore(2)
            self.history = collections.deque([1, 2], maxlen=3)
            self.pending = (n for n in range(3))
            self.lookup = {}.get
            self.module = collections

    return Env()


def test_locks_queues_loggers_and_modules_are_canonicalized_by_type():
    canon = canonicalize(_machinery_env())
    assert canon["logger"] == {"$type": "logging.Logger", "name": "env.orders", "level": 20}
    assert canon["handler"] == {"$type": "logging.StreamHandler", "name": None, "level": 0}
    assert canon["jobs"] == {"$type": "queue.Queue", "maxsize": 5, "items": [{"id": 1}, "two"]}
    assert canon["by_priority"] == {"$type": "queue.PriorityQueue", "maxsize": 0, "items": [[1, "a"], [2, "b"]]}
    assert canon["simple"] == {"$type": "queue.SimpleQueue", "size": 1}
    assert canon["mine"] == {"$type": "queue.Queue", "maxsize": 0, "items": []}
    assert canon["lock"] == {"$type": "threading.Lock", "locked": False}
    assert canon["rlock"] == {"$type": "threading.RLock"}
    assert canon["cond"] == {"$type": "threading.Condition"}
    assert canon["ready"] == {"$type": "threading.Event", "set": False}
    assert canon["slots"] == {"$type": "threading.Semaphore", "value": 2}
    assert canon["history"] == [1, 2]
    assert canon["module"] == {"$type": "module", "name": "collections"}
    assert canon["pending"] == {"$repr": "<generator object _machinery_env.<locals>.Env.__init__.<locals>.<genexpr>>"}
    assert canon["lookup"] == {"$repr": "<built-in method get of dict object>"}


def test_the_canonical_form_of_process_machinery_holds_no_address_and_repeats_across_instances():
    first, second = canonical_json(canonicalize(_machinery_env())), canonical_json(canonicalize(_machinery_env()))
    assert "0x" not in first
    assert first == second


def test_machinery_state_changes_show_in_the_canonical_form():
    env = _machinery_env()
    before = canonicalize(env)
    env.jobs.get()
    env.ready.set()
    env.lock.acquire()
    env.logger.setLevel("DEBUG")
    after = canonicalize(env)
    assert after["jobs"]["items"] == ["two"] and after["ready"]["set"] is True and after["lock"]["locked"] is True
    assert after["logger"]["level"] == 10 and before != after


class _Opaque:
    __slots__ = ()


class _BrokenRepr:
    __slots__ = ()

    def __repr__(self):
        raise RuntimeError("no repr")


def test_a_repr_fallback_never_holds_a_memory_address():
    canon = canonicalize({"o": _Opaque(), "f": _Opaque.__init__, "b": _BrokenRepr()})
    assert canon["o"] == {"$repr": "<tests.core.test_canonical._Opaque object>"}
    assert canon["b"] == {"$repr": "<_BrokenRepr object>"}
    assert "0x" not in canonical_json(canon)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<Foo object at 0x7f3a2b1c0d90>", "<Foo object>"),
        ("[<A object at 0x1234>, <B object at 0xABCdef>]", "[<A object>, <B object>]"),
        ("<bound method E.f of <E object at 0x7f00>>", "<bound method E.f of <E object>>"),
        ("meet at 0xfade, then at 0xdeadbeefs", "meet, then at 0xdeadbeefs"),  # a word, not an address, stays
        ("no address, 0x10 is a number", "no address, 0x10 is a number"),
    ],
)
def test_without_addresses(text, expected):
    assert without_addresses(text) == expected


def test_a_pydantic_model_is_stored_as_its_fields_not_its_pickle_state():
    """pydantic's ``__getstate__`` wraps the fields under ``__dict__``: the state is the fields, enums as values."""
    import enum

    import pydantic

    from pipeline.core.canonical import object_state

    class Status(str, enum.Enum):
        ACTIVE = "Active"

    class Line(pydantic.BaseModel):
        line_id: str
        status: Status

    line = Line(line_id="L1", status=Status.ACTIVE)
    assert object_state(line) == {"line_id": "L1", "status": Status.ACTIVE}
    assert canonicalize({"lines": {"L1": line}}) == {"lines": {"L1": {"line_id": "L1", "status": "Active"}}}


def test_snapshots_of_successive_states_equal_canonicalize_and_stored_json_whatever_changed():
    """Snapshots keeps the canonical form of what did not change (same pickle) and computes the rest again: at every
    step of a sequence of in-place changes its value and text are canonicalize's and stored_json's, for plain data,
    key order, sets, enums, objects, unpicklable locks, a non-string key and a reference back to an attribute."""
    import enum
    import logging
    import threading

    from pipeline.core.canonical import Snapshots, canonicalize, stored_json

    class Color(str, enum.Enum):
        RED = "red"
        BLUE = "blue"

    class Box:
        def __init__(self, n):
            self.n, self._hidden = n, object()

    orders = {"o1": {"status": "pending", "items": [1, 2]}, "o2": {"status": "done", "items": []}}
    logger = logging.getLogger("envsim.test.snapshots")  # pickles as its name alone, whatever its level
    attrs = {"orders": orders, "tags": {"a", "b"}, "color": Color.RED, "box": Box(1), "lock": threading.Lock()}
    attrs["loggers"] = {"main": logger}
    changes = [
        lambda: orders["o1"].update(status="cancelled"),
        lambda: orders.update(o3={"status": "new", "items": [0.5, -0.0]}),
        lambda: orders.pop("o1"),
        lambda: orders.update(o1=orders.pop("o2")),  # the same records in another key order
        lambda: attrs["tags"].add("c"),
        lambda: attrs.update(color=Color.BLUE),
        lambda: setattr(attrs["box"], "n", 2),
        lambda: attrs["lock"].acquire(),
        lambda: logger.setLevel(logging.DEBUG),
        lambda: attrs.update(numbers={1: "one", "1": "str one"}),
        lambda: orders["o3"].update(back=orders),  # a cycle back to the attribute
        lambda: None,  # nothing changed
    ]
    snaps = Snapshots()
    for change in [lambda: None, *changes]:
        change()
        value, text = snaps.take(attrs)
        assert value == canonicalize(attrs) and text == stored_json(canonicalize(attrs)), text
    attrs["lock"].release()
