import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.core.canonical import CanonicalTextCache, canonical_json, canonicalize
from pipeline.core.delta import DeltaError, apply, diff

keys = st.one_of(st.sampled_from(["a", "b", "a.b", "1", "", "x.y.z", "$int", "<int>1"]), st.text(max_size=4))
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=5),
)
json_values = st.recursive(
    scalars,
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(keys, children, max_size=5)),
    max_leaves=30,
)
states = st.dictionaries(keys, json_values, max_size=6)


def _same_json(a, b):
    return canonical_json(a) == canonical_json(b)


@settings(max_examples=100, deadline=None)
@given(states, states)
def test_apply_diff_reproduces_target(a, b):
    a, b = canonicalize(a), canonicalize(b)
    delta = diff(a, b)
    assert _same_json(apply(delta, a), b)
    assert (len(delta) == 0) == _same_json(a, b)


@settings(max_examples=100, deadline=None)
@given(states)
def test_diff_with_itself_is_empty(a):
    a = canonicalize(a)
    assert diff(a, a) == []


def test_counting_rules():
    before = {"user": {"name": "a", "tags": [1, 2], "old": 1}, "n": 1}
    after = {"user": {"name": "b", "tags": [1, 2, 3], "new": {"x": 1, "y": 2}}, "n": 1}
    delta = diff(before, after)
    assert [(r["op"], r["path"]) for r in delta] == [
        ("replace", ["user", "name"]),
        ("add", ["user", "new"]),  # a whole new subtree is one add
        ("remove", ["user", "old"]),
        ("replace", ["user", "tags"]),  # a list is one replace
    ]


def test_dotted_keys_and_nested_removal_are_unambiguous():
    before = {"a.b": 1, "a": {"b": 2, "c": {"d": 1}}}
    after = {"a.b": 1, "a": {"b": 3}}
    delta = diff(before, after)
    assert {tuple(r["path"]) for r in delta} == {("a", "b"), ("a", "c")}
    assert apply(delta, before) == after


def test_type_changes_are_replacements():
    assert diff({"v": 1}, {"v": True}) == [{"op": "replace", "path": ["v"], "before": 1, "after": True}]
    assert diff({"v": {"x": 1}}, {"v": [1]})[0]["op"] == "replace"
    # values Python calls equal differ as JSON, inside lists and objects too; key order is no change
    for a, b in ((1, 1.0), (1, True), (0.0, -0.0), (2**60, float(2**60))):
        before, after = {"v": [{"k": a}], "w": 1}, {"v": [{"k": b}], "w": 1}
        assert diff(before, after) == [{"op": "replace", "path": ["v"], "before": [{"k": a}], "after": [{"k": b}]}]
    reordered = {"w": {"y": 2, "x": 1}, "v": [{"b": 2, "a": 1}]}
    assert diff({"v": [{"a": 1, "b": 2}], "w": {"x": 1, "y": 2}}, reordered) == []


def test_apply_rejects_mismatched_delta():
    with pytest.raises(DeltaError):
        apply([{"op": "remove", "path": ["missing"], "before": 1, "after": None}], {"a": 1})
    with pytest.raises(DeltaError):
        apply([{"op": "add", "path": ["a"], "before": None, "after": 2}], {"a": 1})
    with pytest.raises(DeltaError):
        apply([{"op": "replace", "path": ["a", "b"], "before": 1, "after": 2}], {"a": 5})


def test_apply_does_not_mutate_input():
    before = {"a": {"b": [1]}}
    apply(diff(before, {"a": {"b": [2]}}), before)
    assert before == {"a": {"b": [1]}}


@settings(max_examples=100, deadline=None)
@given(states, st.lists(states, min_size=1, max_size=4), st.integers(0, 3))
def test_replayed_states_serialise_like_canonical_json(first, later, levels):
    """The replay path: structure-sharing apply + the incremental canonical writer give, for every
    state of a chain, exactly canonical_json; the source states are never modified."""
    chain = [canonicalize(s) for s in [first, *later]]
    frozen = [canonical_json(s) for s in chain]
    cache = CanonicalTextCache(levels)
    state = cache.parse(frozen[0])
    assert state == chain[0] and cache.text(state) == frozen[0]
    for before, target in zip(chain, chain[1:]):
        state = apply(diff(before, target), state)
        assert cache.text(state) == canonical_json(target)
    assert [canonical_json(s) for s in chain] == frozen


def test_apply_shares_untouched_subtrees():
    before = {"orders": {"o1": {"status": "new"}, "o2": {"status": "new"}}, "users": {"u1": {"name": "a"}}}
    after = apply([{"op": "replace", "path": ["orders", "o1", "status"], "before": "new", "after": "paid"}], before)
    assert after["orders"]["o1"]["status"] == "paid" and before["orders"]["o1"]["status"] == "new"
    assert after["users"] is before["users"] and after["orders"]["o2"] is before["orders"]["o2"]
