"""Arguments that fit together (issue 41): the exploration policy learns relations from the state itself — one
record's values go together, a second argument of a kind is a sibling of the first, keys of a mapping are ids
whatever its values, earlier answers are candidates — and refusals and seeds steer its next draws."""

import random

from pipeline.core.canonical import canonicalize
from pipeline.execution.policy import ExplorationPolicy, PolicySettings
from pipeline.execution.relations import Records, bind, refusal_hints
from tests.support.relational_corpora import SHOP_TOOLS, garage_state, shop_state

STATE = canonicalize(shop_state(3))
TOOLS = {t["function"]["name"]: t["function"] for t in SHOP_TOOLS}


def _bind(params, state=STATE, seed=0, sizes=None, **kw):
    records = Records(state)
    fits = lambda _p, v: isinstance(v, str)
    return bind(records, params, fits, random.Random(seed), sizes or {}, **kw)


def test_arguments_named_like_fields_of_one_record_come_from_that_record():
    for seed in range(40):
        args = _bind(["order_id", "item_ids", "payment_method_id"], seed=seed, sizes={"item_ids": (1, 3)})
        order = STATE["orders"][args["order_id"]]
        assert set(args["item_ids"]) <= {line["item_id"] for line in order["items"].values()}, args
        assert args["payment_method_id"] in STATE["users"][order["user_id"]]["payment_methods"], args


def test_a_second_argument_of_a_kind_is_a_sibling_of_the_first_ones_value():
    sizes = {"item_ids": (1, 3), "new_item_ids": (1, 3)}
    for seed in range(40):
        args = _bind(["order_id", "item_ids", "new_item_ids"], seed=seed, sizes=sizes)
        lines = {line["item_id"]: line for line in STATE["orders"][args["order_id"]]["items"].values()}
        assert len(args["new_item_ids"]) == len(args["item_ids"])
        for old, new in zip(args["item_ids"], args["new_item_ids"]):
            variants = STATE["products"][lines[old]["product_id"]]["variants"]
            assert new in variants and new != old, (old, new)


def test_plain_values_come_together_from_one_record():
    fields = ["address1", "city", "state", "zip", "country"]
    addresses = [u["address"] for u in STATE["users"].values()]
    for seed in range(20):
        args = _bind(["user_id", *fields], seed=seed)
        assert args["user_id"] in STATE["users"]
        assert {k: args[k] for k in fields} in addresses


def test_keys_of_a_mapping_are_ids_whatever_its_values():
    state = canonicalize(garage_state(1))
    assert {_bind(["spot_id"], state=state, seed=s)["spot_id"] for s in range(30)} <= set(state["spots"])
    park = {"name": "park", "parameters": {"properties": {"spot_id": {"type": "string"}}, "required": ["spot_id"]}}
    policy = ExplorationPolicy(
        [{"type": "function", "function": park}], PolicySettings(seed=1, mutate_rate=0.0, relate_rate=0.0)
    )
    drawn = {policy.next_action(state, 0).arguments["spot_id"] for _ in range(30)}
    assert drawn <= set(state["spots"]), drawn  # even drawn one by one: a mapping's keys are its ids


def test_an_answer_of_an_earlier_call_is_a_candidate_a_state_without_it_cannot_give():
    answered = Records(canonicalize({"success": True, "data": {"return_code": "RET-1-#W300"}}))
    args = _bind(["return_code", "payment_method_id"], returned=[answered])
    assert args["return_code"] == "RET-1-#W300"
    policy = ExplorationPolicy([{"type": "function", "function": TOOLS["confirm_return"]}], PolicySettings(seed=2))
    policy.observe({"order_id": "#W300"}, {"success": True, "data": {"return_code": "RET-1-#W300"}})
    codes = {
        policy.related(TOOLS["confirm_return"], ["return_code"], Records(STATE)).get("return_code") for _ in range(10)
    }
    assert codes == {"RET-1-#W300"}


def test_a_refusal_steers_the_next_draws_away_from_the_value_it_named_and_toward_the_condition_it_named():
    records = Records(STATE)
    delivered = sorted(o for o, order in STATE["orders"].items() if order["status"] == "delivered")
    pending = sorted(o for o, order in STATE["orders"].items() if order["status"] == "pending")
    hints = refusal_hints([{"text": "order is not pending", "args": {"order_id": delivered[0]}}], records)
    assert hints.prefer == ["pending"]
    hints = refusal_hints([{"text": f"order {delivered[0]} not found", "args": {"order_id": delivered[0]}}], records)
    assert hints.avoid == {"order_id": {delivered[0]}}
    taught = refusal_hints([{"text": "order is not pending", "args": {"order_id": delivered[0]}}], records)
    drawn = [_bind(["order_id"], seed=s, hints=taught)["order_id"] for s in range(60)]
    untaught = [_bind(["order_id"], seed=s)["order_id"] for s in range(60)]
    assert sum(o in pending for o in drawn) > 2 * sum(o in pending for o in untaught)


def test_a_seed_is_mutated_toward_more_and_the_same_seed_gives_the_same_calls():
    seed_args = {"order_id": "#W300", "item_ids": ["x"], "new_item_ids": ["y"], "payment_method_id": "card_30"}
    settings = PolicySettings(
        seed=4, seed_rate=1.0, seeds={"exchange_delivered_order_items": [seed_args]}, episode_length=50
    )
    tool = [{"type": "function", "function": TOOLS["exchange_delivered_order_items"]}]
    calls = [ExplorationPolicy(tool, settings) for _ in range(2)]
    runs = [[p.next_action(STATE, i).arguments for i in range(50)] for p in calls]
    assert runs[0] == runs[1]
    changed = [a for a in runs[0] if a != seed_args]
    assert len(changed) >= 45  # (almost) every call mutates the seed
    assert any(len(a["item_ids"]) > 1 for a in changed)  # lists grown
    assert sum(sum(a[k] != seed_args[k] for k in a) == 1 for a in changed) > 5  # one argument swapped


def test_an_empty_id_field_is_unset_so_the_id_comes_from_the_table_of_its_kind():
    """Records not yet assigned (``archivist_id: ""``) do not offer "" as an archivist id: ``assign`` draws its
    record from the records and its archivist from the archivists' table (tests/support/user_corpora.py's
    generated corpus, where every ``assign`` had been refused)."""
    state = canonicalize(
        {
            "records": {f"RE00{i}": {"record_id": f"RE00{i}", "status": "new", "archivist_id": ""} for i in (1, 2)},
            "archivists": {"AR01": {"name": "archivist 1", "load": 0}, "AR02": {"name": "archivist 2", "load": 2}},
        }
    )
    assign = {
        "name": "assign",
        "description": "Assign a record to an archivist.",
        "parameters": {
            "type": "object",
            "properties": {"record_id": {"type": "string"}, "archivist_id": {"type": "string"}},
            "required": ["record_id", "archivist_id"],
        },
    }
    policy = ExplorationPolicy(
        [{"type": "function", "function": assign}], PolicySettings(seed=1, episode_length=40, mutate_rate=0.0)
    )
    calls = [policy.next_action(state, i).arguments for i in range(40)]
    assert {c.get("archivist_id") for c in calls} <= {"AR01", "AR02"}, calls[:5]
    assert sum(c.get("record_id") in ("RE001", "RE002") for c in calls) >= 30


def test_an_id_argument_named_for_a_list_of_ids_comes_from_that_list():
    """``swap_course(student_id, from_course_id, to_course_id)`` on students who hold ``courses`` (a list of course
    ids): the course a student leaves is one of that student's own, the one joined another course."""
    students = {f"S{i}": {"name": f"n{i}", "courses": [f"C{i}", f"C{i + 1}"]} for i in range(1, 6)}
    state = canonicalize({"students": students, "courses": {f"C{i}": {"credits": 3} for i in range(1, 8)}})
    for seed in range(40):
        args = _bind(["student_id", "from_course_id", "to_course_id"], state=state, seed=seed)
        assert args["from_course_id"] in students[args["student_id"]]["courses"], args
        assert args.get("to_course_id") != args["from_course_id"], args
