"""The step record is declared once (store/schema.py) and Δ is replayed once (store/reconstruct.replay)."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.core.canonical import canonical_json, canonicalize, stored_json, text_hash
from pipeline.core.delta import diff
from pipeline.labeling.determinism import LABEL_FIELDS
from pipeline.select import samples
from pipeline.store import schema
from pipeline.store.reconstruct import ReplayError, replay

values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-99, 99), st.text(max_size=3)),
    lambda c: st.one_of(st.lists(c, max_size=3), st.dictionaries(st.text(max_size=2), c, max_size=3)),
    max_leaves=12,
)
states = st.dictionaries(
    st.sampled_from(["a", "b", "c"]), st.dictionaries(st.sampled_from(["x", "y"]), values, max_size=2), max_size=3
)


def test_every_step_column_has_one_role_and_stages_take_their_columns_from_the_schema():
    roles = [schema.step_columns(r) for r in (schema.KEY, schema.LABEL, schema.DETAIL)]
    assert sorted(sum(map(list, roles), [])) == sorted(schema.STEPS.names)
    assert tuple(LABEL_FIELDS) == schema.step_columns(schema.LABEL)
    assert {"delta", "state_after_hash", "outcome"} <= set(LABEL_FIELDS) and "code_ref" not in LABEL_FIELDS
    for f in samples.SAMPLE:  # a sample column named like a step column is that step column
        if f.name in schema.STEPS.names:
            assert f.equals(schema.STEPS.field(f.name))
    assert set(samples._STEP_COLUMNS) <= set(schema.STEPS.names)
    assert set(schema.required_text_columns(schema.STEPS)) == {
        f.name for f in schema.STEPS if not f.nullable and f.type == "string"
    }


def _trajectory(chain):
    """(initial text, initial hash, stored steps) of a chain of states."""
    stored = []
    for i, (a, b) in enumerate(zip(chain, chain[1:])):
        stored.append(
            (f"t#{i}", schema.encode_delta(diff(a, b)), text_hash(canonical_json(a)), text_hash(canonical_json(b)))
        )
    return stored_json(chain[0]), text_hash(canonical_json(chain[0])), stored


@settings(max_examples=150, deadline=None)
@given(st.lists(states, min_size=2, max_size=6), st.data())
def test_replay_rebuilds_every_state_and_a_subset_alike(chain, data):
    chain = [canonicalize(s) for s in chain]
    initial, initial_hash, stored = _trajectory(chain)
    full = [(i, b, a) for i, _, _, b, a in replay("t", initial, initial_hash, stored)]
    # the states as stored (their own key order: the initial one's as given, keys a Δ adds after the others),
    # equal to the chain's once sorted
    sort = lambda text: canonical_json(json.loads(text))
    assert full[0][1] == initial
    assert [(sort(b), sort(a)) for _, b, a in full] == [
        (canonical_json(x), canonical_json(y)) for x, y in zip(chain, chain[1:])
    ]
    wanted = set(data.draw(st.lists(st.integers(0, len(stored) - 1), max_size=3)))
    part = [(i, b, a) for i, _, _, b, a in replay("t", initial, initial_hash, stored, wanted)]
    assert part == [r for r in full if r[0] in wanted]


def test_replay_names_the_step_whose_hash_or_delta_is_wrong():
    chain = [{"a": {"x": 1}}, {"a": {"x": 2}}, {"a": {"x": 2}, "b": {"y": [1]}}]
    initial, initial_hash, stored = _trajectory(chain)
    bad_before = [stored[0][:2] + ("f" * 32,) + stored[0][3:], *stored[1:]]  # s_t of step 0 forged
    with pytest.raises(ReplayError, match=r"^t#0: s_t hash f+ != reconstructed") as exc:
        list(replay("t", initial, initial_hash, bad_before, {0}))
    assert exc.value.index == 0
    bad_after = [stored[0], stored[1][:3] + ("0" * 32,)]
    with pytest.raises(ReplayError, match=r"^t#1: s_t \+ Δ hashes to"):
        list(replay("t", initial, initial_hash, bad_after))
    not_json = [stored[0], (stored[1][0], [{**stored[1][1][0], "after": "{nope"}], *stored[1][2:])]
    with pytest.raises(ReplayError, match=r"^t#1: Δ does not apply"):
        list(replay("t", initial, initial_hash, not_json, {0}))  # every Δ is applied, wanted or not
    with pytest.raises(ReplayError, match=r"^t: stored initial state does not match its hash") as exc:
        list(replay("t", initial, "0" * 32, stored))
    assert exc.value.index is None


def test_replay_keeps_the_stored_key_order_and_appends_added_keys():
    chain = [{"zoom": 1, "maps": 2}, {"zoom": 1, "maps": 2, "camera": 3}]
    initial, initial_hash, stored = _trajectory(chain)
    ((_, _, _, before, after),) = replay("t", initial, initial_hash, stored)
    assert before == '{"zoom":1,"maps":2}' and after == '{"zoom":1,"maps":2,"camera":3}'
