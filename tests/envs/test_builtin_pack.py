"""The builtin environment pack: format, generators, and that every domain reaches every stratum."""

import json
from pathlib import Path

from pipeline.envs import builtin, envscaler
from pipeline.execution.policy import ExplorationPolicy, PolicySettings, StateIndex


def test_ten_domains_in_envscaler_format():
    items = builtin.env_items()
    assert len(items) >= 10
    for env_id, item in items.items():
        assert {"env_class_name", "env_class_code", "tools", "environment_introduction", "constraints_rules"} <= set(
            item
        )
        assert isinstance(item["env_class_code"], str) and f"class {item['env_class_name']}" in item["env_class_code"]
        names = [t["function"]["name"] for t in item["tools"]]
        assert len(names) >= 8, env_id
        assert all(not n.startswith("_") for n in names)
        # at least one batch operation (a list argument) per domain: how single calls reach |Δ| 7-12
        assert any(
            p.get("type") == "array" for t in item["tools"] for p in t["function"]["parameters"]["properties"].values()
        ), env_id


def test_export_round_trips_through_the_envscaler_loader(tmp_path):
    env_file, scen_file = builtin.export(tmp_path, per_env=3, seed=5)
    loaded = [envscaler.split_item(r) for r in envscaler.load_env_items(env_file)]
    assert all(not issues for _, issues in loaded)
    assert sorted(i.env_id for i, _ in loaded) == sorted(builtin.CLASSES)
    scenarios = list(envscaler.load_scenarios(scen_file))
    assert len(scenarios) == 3 * len(builtin.CLASSES)
    assert all(isinstance(s, envscaler.Scenario) and s.task for s in scenarios)


def test_export_takes_the_directory_as_a_string_too(tmp_path, monkeypatch):
    """docs/environments.md's ``builtin.export(dir)`` with a string, a relative one not there yet (issue 43, item 9)."""
    monkeypatch.chdir(tmp_path)
    env_file, scen_file = builtin.export("pack/out", per_env=1, seed=0)
    assert (env_file, scen_file) == (
        Path("pack/out/builtin_env_metadata.json"),
        Path("pack/out/builtin_scenarios.json"),
    )
    assert env_file.read_text() == builtin.export(tmp_path / "again", per_env=1, seed=0)[0].read_text()


def test_generators_are_seeded_and_diverse():
    a, b = builtin.scenarios(5, seed=1), builtin.scenarios(5, seed=1)
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    c = builtin.scenarios(5, seed=2)
    assert json.dumps(a, sort_keys=True) != json.dumps(c, sort_keys=True)
    configs = [json.dumps(s["init_config"], sort_keys=True) for s in a]
    assert len(set(configs)) == len(configs)
    assert len({s["task_id"] for s in a}) == len(a)


def test_policy_draws_arguments_from_live_state():
    state = {"accounts": {"AC1": {"balance": 5}, "AC2": {"balance": 7}}, "transactions": {}}
    index = StateIndex(state)
    assert index.candidates("from_account") == ["AC1", "AC2"]
    assert index.candidates("to_accounts") == ["AC1", "AC2"]
    assert index.candidates("balance") == [5, 7]
    tools = [
        {
            "function": {
                "name": "transfer",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "from_account": {"type": "string"},
                        "to_accounts": {"type": "array", "items": {"type": "string"}},
                        "amount": {"type": "number"},
                    },
                    "required": ["from_account", "to_accounts", "amount"],
                },
            }
        }
    ]
    policy = ExplorationPolicy(tools, PolicySettings(seed=3, mutate_rate=0.0))
    action = policy.next_action(state, 0)
    assert action.arguments["from_account"] in ("AC1", "AC2")
    assert set(action.arguments["to_accounts"]) <= {"AC1", "AC2"}
    again = ExplorationPolicy(tools, PolicySettings(seed=3, mutate_rate=0.0)).next_action(state, 0)
    assert again == action  # seeded


def test_enum_choices_come_from_docstrings():
    item = envscaler.parse_env_item("projects", builtin.env_items()["projects"])
    tool = next(t for t in item.tools if t["function"]["name"] == "update_status")
    assert tool["function"]["parameters"]["properties"]["status"]["enum"] == ["backlog", "blocked"]


def test_quoted_choices_in_a_generated_docstring_become_the_enum_too():
    """Generated code often quotes the values (``one of 'pending', 'shipped' or 'delivered'``, ``either "asc" or
    "desc"``): the derived schema gets them as its enum; a phrase that is no list of values gets none."""
    code = '''
class Orders:
    def __init__(self, init_config=None):
        self.orders = {}

    def set_status(self, order_id: str, status: str, order: str = "asc", note: str = ""):
        """Change an order's status.

        Args:
            order_id (str): One of the user's orders.
            status (str): The new status, one of 'pending', 'shipped' or 'delivered'.
            order (str): Sort order: either "asc" or "desc".
            note (str): Either the customer's words or nothing.
        """
        return {"success": True}
'''
    item = envscaler.parse_env_item("orders", {"env_class_name": "Orders", "env_class_code": code})
    properties = item.tools[0]["function"]["parameters"]["properties"]
    assert properties["status"]["enum"] == ["pending", "shipped", "delivered"]
    assert properties["order"]["enum"] == ["asc", "desc"]
    assert "enum" not in properties["order_id"] and "enum" not in properties["note"]


def test_a_numbers_stated_range_becomes_its_bounds_and_exploration_keeps_to_them():
    """Docstrings state ranges in words (``10 to 30``, ``between 5 and 30``, ``(1-60)``, interval notation
    ``(0-5]``, ``at least``/``at most``, ``positive``): the derived schema gets them as bounds, and a list
    (``1, 2, 3, 5, 8 or 13``) as its enum, and exploration draws within them (unbounded, an integer was drawn
    from 1-5, so ``10 to 30`` was never called in range). A phrase that states no bound (``45-minute slots``,
    ``at most the balance``) gives none."""
    code = '''
class Dials:
    def __init__(self, init_config=None):
        self.level = 0

    def set_all(self, degrees: int, hour: int, days: int, rate: float, count: int, price: float, slots: int,
                pto: int, points: int, story: int):
        """Set every dial.

        Args:
            degrees (int): 10 to 30.
            hour (int): Between 5 and 23.
            days (int): Days to advance (1-60).
            rate (float): Interest rate in percent (0-5].
            count (int): At least 2, at most 9.
            price (float): New price, greater than 0.
            slots (int): Number of 45-minute slots.
            pto (int): Hours taken, at most the balance.
            points (int): Points to redeem, a positive multiple of 10.
            story (int): Story points (1, 2, 3, 5, 8 or 13).
        """
        return {"success": True}
'''
    item = envscaler.parse_env_item("dials", {"env_class_name": "Dials", "env_class_code": code})
    props = item.tools[0]["function"]["parameters"]["properties"]
    bounds = {name: {k: v for k, v in p.items() if "imum" in k} for name, p in props.items()}
    assert bounds == {
        "degrees": {"minimum": 10, "maximum": 30},
        "hour": {"minimum": 5, "maximum": 23},
        "days": {"minimum": 1, "maximum": 60},
        "rate": {"exclusiveMinimum": 0.0, "maximum": 5.0},
        "count": {"minimum": 2, "maximum": 9},
        "price": {"exclusiveMinimum": 0.0},
        "slots": {},
        "pto": {},
        "points": {"minimum": 1},
        "story": {},
    }
    assert props["story"]["enum"] == [1, 2, 3, 5, 8, 13]  # a list of numbers is their enum
    policy = ExplorationPolicy(item.tools, PolicySettings(seed=0, mutate_rate=0.0))
    drawn = [policy.next_action({"level": 0}, 0).arguments for _ in range(200)]
    assert all(10 <= a["degrees"] <= 30 and 5 <= a["hour"] <= 23 and 0 < a["rate"] <= 5 for a in drawn)
    assert {a["story"] for a in drawn} == {1, 2, 3, 5, 8, 13}
    assert max(a["degrees"] for a in drawn) > 20 and max(a["days"] for a in drawn) > 30  # the whole range


def test_a_list_of_names_is_drawn_from_the_mapping_keyed_by_them():
    """``restock_supplies(supply_names, quantity)`` on ``{"supplies": {"gloves": 3, ...}}``: the names are the keys
    of ``supplies`` (not ids, so no entity table), or the values held as ``supply`` elsewhere in the state."""
    state = {"supplies": {"gloves": 3, "gauze": 0}, "procedures": {"PR1": {"supply": "swab", "price": 15}}}
    assert set(StateIndex({"supplies": state["supplies"]}).candidates("supply_names")) == {"gloves", "gauze"}
    assert StateIndex(state).candidates("supply_names") == ["swab"]  # held as ``supply``: the procedures' own
    item = envscaler.parse_env_item("clinic", builtin.env_items()["clinic"])
    tools = [t for t in item.tools if t["function"]["name"] == "restock_supplies"]
    policy = ExplorationPolicy(tools, PolicySettings(seed=1, mutate_rate=0.0))
    drawn = [policy.next_action({"supplies": state["supplies"]}, 0).arguments for _ in range(20)]
    assert all(set(a["supply_names"]) <= {"gloves", "gauze"} and 1 <= a["quantity"] <= 100 for a in drawn)
