"""Reference (gold) actions a scenario item carries are read under the documented keys, in the shapes corpora write
them (issue 41; docs/environments.md "Reference actions"), and a list that cannot be read is an issue naming the
scenario, which is explored all the same."""

import json

from pipeline.core.issues import TaskIssue
from pipeline.envs.envscaler import REFERENCE_KEYS, Scenario, load_scenarios, reference_actions


def test_every_documented_key_and_call_shape_is_read():
    calls = [
        {"name": "get_order_details", "kwargs": {"order_id": "#W1"}},  # tau-bench
        {"name": "cancel", "arguments": {"order_id": "#W1", "reason": "x"}},
        {"name": "pay", "arguments": '{"plate": "KA-1"}'},  # arguments as a JSON text
        {"type": "function", "function": {"name": "leave", "arguments": '{"plate": "KA-1"}'}},  # OpenAI
        'park(spot_id="A1", plate="KA-1")',  # a call string
    ]
    want = (
        ("get_order_details", {"order_id": "#W1"}),
        ("cancel", {"order_id": "#W1", "reason": "x"}),
        ("pay", {"plate": "KA-1"}),
        ("leave", {"plate": "KA-1"}),
        ("park", {"spot_id": "A1", "plate": "KA-1"}),
    )
    for key in REFERENCE_KEYS:
        assert reference_actions({key: calls}) == (want, None), key
    assert reference_actions({"actions": json.dumps(calls)}) == (want, None)  # the list as a JSON text
    assert reference_actions({"task": "no reference"}) == ((), None)


def test_a_list_that_cannot_be_read_is_an_issue_and_the_scenario_is_kept(tmp_path):
    path = tmp_path / "scenarios.json"
    rows = [
        {"task_id": "t1", "env_id": "e", "init_config": {}, "gold_actions": [{"arguments": {}}]},
        {"task_id": "t2", "env_id": "e", "init_config": {}, "reference_actions": ["park(1, 2)"]},
        {"task_id": "t3", "env_id": "e", "init_config": {}, "actions": [{"name": "pay", "args": {"plate": "P"}}]},
    ]
    path.write_text(json.dumps(rows))
    out = list(load_scenarios(path))
    issues = [o for o in out if isinstance(o, TaskIssue)]
    scenarios = {o.task_id: o for o in out if isinstance(o, Scenario)}
    assert [i.task_id for i in issues] == ["t1", "t2"] and all(
        "reference actions not replayed" in i.reason for i in issues
    )
    assert "'gold_actions'" in issues[0].reason and "tool name" in issues[0].reason
    assert set(scenarios) == {"t1", "t2", "t3"}  # explored all the same
    assert scenarios["t1"].reference == () and scenarios["t3"].reference == (("pay", {"plate": "P"}),)
