"""EnvScaler's released format, end to end: load, validate, explore, label, verify."""

import json
import re

import pyarrow.parquet as pq
import pytest

from pipeline.collect.explore import ExploreSettings
from pipeline.collect.run import collect_all
from pipeline.collect.sources import SourceConfig, env_items
from pipeline.core.trajectory import Action, Trajectory
from pipeline.envs import envscaler
from pipeline.envs.catalog import build_catalog
from pipeline.envs.config import EnvScalerCorpus
from pipeline.envs.registry import sources_config
from pipeline.execution.child import Limits
from pipeline.execution.sandbox import Sandbox
from pipeline.labeling.steps import label
from pipeline.store.layout import DataLayout
from pipeline.store.reconstruct import verify_steps
from tests.support.envscaler_corpus import COUNTER_CODE, write_corpus


@pytest.fixture(scope="module")
def fast_sandbox():
    with Sandbox(workers=2, limits=Limits(call_timeout_s=1.5, memory_mb=512)) as box:
        yield box


@pytest.fixture(scope="module")
def corpus_run(tmp_path_factory, fast_sandbox):
    sandbox = fast_sandbox
    tmp = tmp_path_factory.mktemp("envscaler")
    env_file, scen_file = write_corpus(tmp)
    cfg = sources_config(
        bfcl={"replay": False}, builtin={"enabled": False}, envscaler=[EnvScalerCorpus(env_file, scen_file)]
    )
    layout = DataLayout.at(tmp / "data")
    items, issues = env_items(cfg)
    build_catalog(layout, items, issues)
    settings = ExploreSettings(call_budget=60, episode_length=6, batch_episodes=10, min_envs=1)
    result = collect_all(cfg, layout, sandbox, settings)
    labeled = label(layout, sandbox)
    return layout, items, issues, result, labeled


def test_bad_env_items_are_reported_per_record(corpus_run):
    _, items, issues, _, _ = corpus_run
    assert sorted(i.env_id for i in items) == ["bad_schema", "counter_shop", "hostile"]
    by_env = {}
    for issue in issues:
        by_env.setdefault(issue.task_id, []).append(issue.reason)
    assert "does not compile" in by_env["broken_syntax"][0]
    assert "class 'Ghost' is not defined" in by_env["missing_class"][0]
    assert "does not accept" in by_env["bad_schema"][0] or "omits required" in by_env["bad_schema"][0]
    bad_schema = next(i for i in items if i.env_id == "bad_schema")
    assert bad_schema.tool_names == ["count"]  # the valid tool survives


def test_tools_are_derived_from_signatures_and_docstrings(corpus_run):
    _, items, _, _, _ = corpus_run
    hostile = next(i for i in items if i.env_id == "hostile")
    assert hostile.tools_derived and "bump" in hostile.tool_names and "__init__" not in hostile.tool_names
    shop = envscaler.parse_env_item("s", {"env_class_name": "CounterShop", "env_class_code": COUNTER_CODE})
    sell = next(t["function"] for t in shop.tools if t["function"]["name"] == "sell")
    assert sell["description"] == "Sell units of an item."
    assert sell["parameters"]["properties"] == {
        "item": {"type": "string", "description": "Item name."},
        "qty": {"type": "integer", "description": "Units sold."},
    }
    assert sell["parameters"]["required"] == ["item", "qty"]


DESCRIPTOR_CODE = """
import abc
import functools
from functools import cached_property


class Shop:
    def __init__(self):
        self.items = {"a": 1}
        self._total = 0

    @property
    def total(self):
        return self._total

    @total.setter
    def total(self, value):
        self._total = value

    @cached_property
    def catalog(self):
        return sorted(self.items)

    @functools.cached_property
    def summary(self):
        return len(self.items)

    def legacy(self):
        return 1

    legacy = property(legacy)

    @staticmethod
    def helper():
        return 2

    @functools.lru_cache(maxsize=None)
    def price(self, item: str):
        \"\"\"Price of an item.\"\"\"
        return 3

    def add(self, item: str):
        \"\"\"Add an item.\"\"\"
        self.items[item] = 1
        return {"success": True}
"""


def test_descriptors_and_rebound_names_are_not_tools():
    """``property`` (and its setter), ``functools.cached_property`` however spelt, a method rebound to a property
    later in the body and static methods are not tools; methods under other decorators (``lru_cache``) are."""
    item = envscaler.parse_env_item("shop", {"env_class_name": "Shop", "env_class_code": DESCRIPTOR_CODE})
    assert item.tools_derived
    assert item.tool_names == ["price", "add"]


def test_a_schema_naming_a_descriptor_is_reported_and_dropped():
    params = {"type": "object", "properties": {"item": {"type": "string"}}, "required": ["item"]}
    add = {"type": "function", "function": {"name": "add", "parameters": params}}
    summary = {"type": "function", "function": {"name": "summary", "parameters": {"type": "object"}}}
    raw = {"env_class_name": "Shop", "env_class_code": DESCRIPTOR_CODE, "tools": [summary, add]}
    item = envscaler.parse_env_item("shop", raw)
    assert item.tool_names == ["add"]
    assert any("'summary' has no public method" in p for p in item.problems), item.problems


def test_code_of_action_is_the_method_source():
    code = envscaler.method_source(COUNTER_CODE, "CounterShop", "sell")
    assert code.startswith("def sell(self, item: str, qty: int):") and "self.till += qty * 2" in code


def test_scenarios_with_bad_configs_are_reported(corpus_run):
    _, _, _, result, _ = corpus_run
    issues = {i.task_id: i for i in result.report.issues}
    assert "ValueError: stock must be a mapping" in issues["shop-ctor-raises"].reason
    assert "unknown or unusable env_id 'no_such_env'" in issues["shop-unknown-env"].reason


def test_corpus_is_explored_and_labeled_end_to_end(corpus_run):
    layout, _, _, result, labeled = corpus_run
    assert result.report.by_strategy["explore"] >= 2
    steps = [r for p in layout.step_parts() for r in pq.read_table(p).to_pylist()]
    shop = [s for s in steps if s["env_id"] == "envscaler/counter_shop"]
    assert shop, "the shop scenario was explored"
    assert {s["tool"] for s in shop} <= {"sell", "count"}
    assert all(s["delta_size"] == 0 for s in shop if s["outcome"] == "failure")
    initial = pq.read_table(layout.trajectories).to_pylist()
    shop_row = next(r for r in initial if r["env_id"] == "envscaler/counter_shop")
    state = json.loads(shop_row["initial_state_json"])
    assert state["stock"] == {"apple": 3, "pear": 1} and state["till"] == 0 and state["_log"] == []
    assert verify_steps(layout).ok


def test_explicit_trajectory_labels(corpus_run, fast_sandbox):
    _, items, _, _, _ = corpus_run
    shop = next(i for i in items if i.env_id == "counter_shop")
    traj = Trajectory(
        "t",
        "shop-1",
        shop.spec({"stock": {"apple": 3, "pear": 1}, "till": 0}),
        (
            Action("sell", {"item": "apple", "qty": 2}),
            Action("sell", {"item": "pear", "qty": 5}),
            Action("count", {}),
            Action("sell", {"item": "kiwi"}),
        ),
    )
    [(_, result)] = list(fast_sandbox.run([traj]))
    sell, too_many, count, bad_args = result["steps"]
    # Δ: stock.apple, till, and the private _log (EnvScaler state = vars minus dunders)
    assert sell["outcome"] == "success" and sell["delta_size"] == 3
    assert sorted(tuple(d["path"]) for d in sell["delta"]) == [("_log",), ("stock", "apple"), ("till",)]
    assert sell["raw_observation"] == "{'success': True, 'data': {'left': 1}}"  # str(return value)
    assert too_many["outcome"] == "failure" and too_many["delta_size"] == 0
    assert (
        count["outcome"] == "success"
        and count["args_count"] == 0
        and count["observation_json"] == '{"data":2,"success":true}'
    )
    assert bad_args["outcome"] == "error" and bad_args["error_type"] == "TypeError"


OPAQUE_CODE = '''
class Card:
    def __init__(self, title):
        self.title = title


class Board:
    def __init__(self, init_config):
        self.cards = []
        self.pending = (n for n in range(3))

    def add(self, title: str):
        """Add a card and hand it back."""
        card = Card(title)
        self.cards.append(card)
        return {"success": True, "data": card}

    def fail(self):
        """Raise with an object in the message."""
        raise ValueError(f"cannot file {Card('x')}")
'''


def test_observations_and_error_messages_hold_no_memory_address(fast_sandbox):
    """``str(return value)`` and an exception's message keep a default repr without its address, so two
    executions of the same calls agree (docs/definitions.md §4.1)."""
    tools = [
        {"type": "function", "function": {"name": n, "parameters": {"type": "object", "properties": p}}}
        for n, p in (("add", {"title": {"type": "string"}}), ("fail", {}))
    ]
    board = envscaler.EnvItem(env_id="board", class_name="Board", class_code=OPAQUE_CODE, tools=tools)
    traj = Trajectory("envscaler/board/t", "t", board.spec({}), (Action("add", {"title": "a"}), Action("fail", {})))
    runs = [[s for _, r in fast_sandbox.run([traj], fresh_children=True) for s in r["steps"]] for _ in range(2)]
    add, fail = runs[0]
    assert re.fullmatch(r"\{'success': True, 'data': <envscaler_env_\w+\.Card object>\}", add["raw_observation"])
    assert fail["error_message"].startswith("cannot file <") and "0x" not in fail["error_message"]
    assert fail["raw_observation"] == f"Error: ValueError: {fail['error_message']}"
    labels = ("raw_observation", "error_message", "state_after_hash")
    assert [[s[k] for k in labels] for s in runs[0]] == [[s[k] for k in labels] for s in runs[1]]


TYPED_CODE = """
import dataclasses
from pydantic import BaseModel


class Device(BaseModel):
    apps: dict


@dataclasses.dataclass
class Wallet:
    balance: int


class Account:
    def __init__(self, owner):
        self.owner = owner


class Shop:
    device: Device

    def __init__(self):
        self.device = None
        self.wallet = Wallet(0)
        self.account = None

    @classmethod
    def build(cls, init_config):
        shop = cls()
        shop.account = Account(**init_config["account"])
        return shop

    def apps(self) -> list:
        return list(self.device.apps)
"""


def test_typed_construction_validates_into_annotated_and_constructed_types():
    namespace = envscaler._exec_module("typed_test", TYPED_CODE)
    cls = namespace["Shop"]
    shop = envscaler.construct(cls, namespace, {"device": {"apps": {"b": 1, "a": 2}}, "wallet": {"balance": 5}}, None)
    assert type(shop.device).__name__ == "Device" and list(shop.device.apps) == ["b", "a"]  # the annotation
    assert type(shop.wallet).__name__ == "Wallet" and shop.wallet.balance == 5  # the type the constructor set
    built = envscaler.construct(cls, namespace, {"account": {"owner": "ana"}}, "build")  # a declared constructor
    assert built.account.owner == "ana"
    with pytest.raises(TypeError, match=r"init_config\['wallet'\] does not fit Wallet"):
        envscaler.construct(cls, namespace, {"wallet": {"coins": 5}}, None)
    with pytest.raises(TypeError, match="env_constructor 'make' is neither"):
        envscaler.construct(cls, namespace, {}, "make")
    item = envscaler.parse_env_item(
        "shop", {"env_class_name": "Shop", "env_class_code": TYPED_CODE, "env_constructor": "build"}
    )
    assert item.constructor == "build" and item.spec({}).options["env_constructor"] == "build"
    plain = envscaler.parse_env_item("shop", {"env_class_name": "Shop", "env_class_code": TYPED_CODE})
    assert "env_constructor" not in plain.spec({}).options  # no option: the fingerprints of other corpora stay


def test_code_of_a_decorated_method_holds_its_decorators_and_their_definitions():
    code = """
import functools


def answers_errors(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except ValueError as exc:
            return f"Error: {exc}"
    return wrapper


class Desk:
    def plain(self):
        return 1

    @answers_errors
    @functools.lru_cache(maxsize=None)
    def refuse(self, x: int):
        raise ValueError("no")
"""
    assert envscaler.method_source(code, "Desk", "plain") == "def plain(self):\n    return 1"
    source = envscaler.method_source(code, "Desk", "refuse")
    assert source.startswith("def answers_errors(fn):") and "@answers_errors\n@functools.lru_cache" in source
    assert source.endswith('def refuse(self, x: int):\n    raise ValueError("no")')


def test_a_form_feed_or_crlf_line_ends_keep_the_decorator_lines_of_code_of_action():
    """Lines as the parser numbers them: a form feed in the class code (a page break, as older code has) does not
    end a line, so the decorator lines above a method stay its own; Windows line ends are kept as they are."""
    code = (
        'def deco(f):\n    return f\n\n\nclass Pager:\n    """Pages.\x0c"""\n\x0c\n'
        '    @deco\n    def turn(self, n: int):\n        return {"page": n, "mark": "é"}\n'
    )
    source = envscaler.method_source(code, "Pager", "turn")
    assert source == 'def deco(f):\n    return f\n\n@deco\ndef turn(self, n: int):\n    return {"page": n, "mark": "é"}'
    windows = envscaler.method_source(code.replace("\n", "\r\n"), "Pager", "turn")
    body = '@deco\r\ndef turn(self, n: int):\r\n    return {"page": n, "mark": "é"}'
    assert windows == "def deco(f):\r\n    return f\n\n" + body  # the parts are joined by a blank line
