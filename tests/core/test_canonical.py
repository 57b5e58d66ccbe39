import datetime as dt
import math
from decimal import Decimal

import pytest

from pipeline.core.canonical import canonical_json, canonicalize, state_hash


class Node:
    def __init__(self, name, parent=None):
        self.name = name
        self.parent = parent
        self.children = {}
        self._private = "hidden"


def test_plain_json_is_unchanged_and_sorted():
    state = {"b": [1, 2.5, "x", None, True], "a": {"z": 1, "y": {}}}
    canon = canonicalize(state)
    assert canon == state
    assert list(canon) == ["a", "b"]
    assert canonical_json(canon) == '{"a":{"y":{},"z":1},"b":[1,2.5,"x",null,true]}'


def test_key_type_clash_does_not_merge():
    canon = canonicalize({1: "int", "1": "str", 2: "two"})
    assert canon == {"1": "str", "<int>1": "int", "2": "two"}


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
