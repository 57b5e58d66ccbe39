"""LLM-written environments (EnvScaler format) that use the ordinary class machinery — dataclasses
(``field(default_factory=...)``), ``enum``, ``TypedDict``, ``NamedTuple``, properties, ``__slots__``,
class-level mutable defaults and ``datetime`` formatting — run in the real sandbox: the reset succeeds,
no step errors, and two executions in fresh children give identical labels (nothing to quarantine).

Before issue 33 the code was compiled with the ``from __future__ import annotations`` of
``pipeline/envs/blobs.py``; ``@dataclass`` then failed with ``'NoneType' object has no attribute
'__dict__'`` because the env's module was not in ``sys.modules``."""

from __future__ import annotations

import pytest

from pipeline.core.trajectory import Action, Trajectory
from pipeline.envs.envscaler import EnvItem
from pipeline.envs.registry import sources_config

_HEADER = """
import datetime
import enum
from dataclasses import dataclass, field, asdict
from typing import Dict, List, NamedTuple, Optional, TypedDict
"""

_TOOL_BODY = '''
    def act(self):
        """Use the classes; the result goes into the state and the observation."""
        value = self._use()
        self.log.append(value)
        return {"success": True, "data": value}
'''

#: name -> (module-level definitions, body of ``_use``)
ENVS = {
    "dataclass_factory": (
        """
@dataclass
class Item:
    name: str
    qty: int = 0
    tags: List[str] = field(default_factory=list)
    meta: Dict[str, int] = field(default_factory=dict)
    note: Optional[str] = None
""",
        """
        item = Item("apple", 3)
        item.tags.append("fruit")
        item.meta["n"] = len(self.log)
        return asdict(item)""",
    ),
    "dataclass_frozen_order": (
        """
@dataclass(frozen=True, order=True)
class Version:
    major: int
    minor: int = 0
""",
        """
        vs = sorted([Version(2, 1), Version(1, 5), Version(2)])
        return [repr(v) for v in vs] + [hash(Version(1)) == hash(Version(1))]""",
    ),
    "enum": (
        """
class Status(enum.Enum):
    OPEN = "open"
    CLOSED = "closed"

class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2

class Perm(enum.Flag):
    R = enum.auto()
    W = enum.auto()
""",
        """
        return [Status("open").name, Status.CLOSED.value, int(Level.HIGH), str(Perm.R | Perm.W), [s.value for s in \
Status]]""",
    ),
    "typeddict_namedtuple": (
        """
class Order(TypedDict):
    id: str
    total: float

class Point(NamedTuple):
    x: int
    y: int = 0
""",
        """
        order: Order = {"id": "o1", "total": 9.5}
        p = Point(3)
        return [order, p._asdict(), list(p._replace(y=4)), Point.__annotations__ == {"x": int, "y": int}]""",
    ),
    "property_slots": (
        """
class Account:
    __slots__ = ("_balance", "owner")

    def __init__(self, owner, balance=0):
        self.owner = owner
        self._balance = balance

    @property
    def balance(self):
        return self._balance

    @balance.setter
    def balance(self, value):
        if value < 0:
            raise ValueError("negative")
        self._balance = value
""",
        """
        a = Account("ann", 10)
        a.balance = a.balance + 5
        return [a.owner, a.balance, hasattr(a, "__dict__")]""",
    ),
    "class_mutable_default": (
        """
class Registry:
    items = []
    counts = {}

    def add(self, key):
        self.items.append(key)
        self.counts[key] = self.counts.get(key, 0) + 1
        return len(self.items)
""",
        """
        r = Registry()
        return [r.add("k"), dict(Registry.counts)]""",
    ),
    "datetime_format": (
        """
@dataclass
class Booking:
    when: datetime.datetime
    days: int = 1

    @property
    def until(self) -> str:
        return (self.when + datetime.timedelta(days=self.days)).strftime("%Y-%m-%d %H:%M")
""",
        """
        b = Booking(datetime.datetime(2024, 5, 1, 9, 30), 2)
        parsed = datetime.datetime.strptime("2024-05-01", "%Y-%m-%d").date()
        return [b.until, b.when.isoformat(), parsed.isoformat(), datetime.datetime.now().strftime("%A %d %B %Y")]""",
    ),
    "future_annotations_in_env": (
        """
from __future__ import annotations
""",
        '''
        return "unused"''',
    ),
}


def _code(definitions: str, use: str) -> str:
    if definitions.strip().startswith("from __future__"):
        # the env's own future import must come first; then a dataclass with string annotations
        return (
            definitions
            + _HEADER
            + """
@dataclass
class Cart:
    items: list[str] = field(default_factory=list)
    owner: Optional[str] = None

class Env:
    def __init__(self, init_config):
        self.log = []

    def _use(self):
        c = Cart()
        c.items.append("x")
        return asdict(c)
"""
            + _TOOL_BODY
        )
    return (
        _HEADER
        + definitions
        + '''

class Env:
    """An LLM-style environment."""

    def __init__(self, init_config):
        self.log = []

    def _use(self):'''
        + use
        + "\n"
        + _TOOL_BODY
    )


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "act",
            "description": "Use the classes",
            "parameters": {"type": "object", "properties": {}},
        },
    }
]


def _trajectory(name: str, index: int = 0) -> Trajectory:
    item = EnvItem(env_id=f"benign_{name}", class_name="Env", class_code=_code(*ENVS[name]), tools=TOOLS)
    return Trajectory(
        f"envscaler/benign_{name}/t{index}",
        f"t{index}",
        item.spec({}),
        tuple(Action("act", {}) for _ in range(3)),
        seed=5,
    )


LABELS = ("raw_observation", "state_after_hash", "outcome", "delta_size")


def _labels(result: dict) -> list[tuple]:
    return [tuple(str(s.get(f)) for f in LABELS) for s in result["steps"]]


@pytest.mark.parametrize("name", sorted(ENVS))
def test_llm_style_class_machinery_runs_and_is_deterministic(sandbox, name):
    trajectories = [_trajectory(name, i) for i in range(2)]
    first = [r for _, r in sandbox.run(trajectories, fresh_children=True)]
    second = [r for _, r in sandbox.run(trajectories, fresh_children=True)]
    for a, b in zip(first, second):
        assert a["init"] is not None, a["init_error"]
        assert [s["outcome"] for s in a["steps"]] == ["success"] * 3, a["steps"][0]["raw_observation"]
        assert _labels(a) == _labels(b)


def test_benign_corpus_is_collected_labeled_and_not_quarantined(tmp_path, sandbox):
    """The same environments as a user's EnvScaler corpus (metadata + scenarios files): collected,
    labeled, and the determinism check — every trajectory re-executed in a sandbox of its own —
    quarantines none; every environment's reset succeeded (it has steps)."""
    import json

    import duckdb

    from pipeline.collect.explore import ExploreSettings
    from pipeline.collect.run import collect_all
    from pipeline.collect.sources import SourceConfig, env_items
    from pipeline.envs.catalog import build_catalog
    from pipeline.envs.config import EnvScalerCorpus
    from pipeline.execution.child import Limits
    from pipeline.execution.sandbox import Sandbox
    from pipeline.labeling.determinism import check_determinism
    from pipeline.labeling.steps import label
    from pipeline.store.layout import DataLayout

    items = {
        f"benign_{name}": {
            "env_class_name": "Env",
            "env_class_code": _code(*ENVS[name]),
            "environment_introduction": name,
            "constraints_rules": "",
        }
        for name in ENVS
    }
    scenarios = [
        {"task_id": f"{env}-{i}", "env_id": env, "env_class_name": "Env", "init_config": {}, "task": "Use the classes."}
        for env in items
        for i in range(2)
    ]
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "191_env_metadata.json").write_text(json.dumps(items))
    (corpus / "scenarios.json").write_text(json.dumps(scenarios))
    cfg = sources_config(
        bfcl={"categories": [], "replay": False},
        builtin={"enabled": False},
        envscaler=[EnvScalerCorpus(corpus / "191_env_metadata.json", corpus / "scenarios.json")],
    )
    layout = DataLayout.at(tmp_path / "data")
    env_list, issues = env_items(cfg)
    build_catalog(layout, env_list, issues, disabled=("bfcl",))
    collect_all(
        cfg,
        layout,
        sandbox,
        ExploreSettings(seed=5, call_budget=40, batch_episodes=4, min_envs=1, episode_length=3, mutate_rate=0.0),
    )
    label(layout, sandbox)
    rows = duckdb.sql(
        f"SELECT env_id, outcome, count(*) FROM read_parquet({layout.step_parts()!r}) GROUP BY ALL"
    ).fetchall()
    assert {r[0] for r in rows} == {f"envscaler/{env}" for env in items}, rows
    assert not [r for r in rows if r[1] == "error"], rows
    with Sandbox(workers=2, limits=Limits(call_timeout_s=10)) as box:
        report = check_determinism(layout, box, sample_size=-1)
    assert report.steps_compared > 0
    assert report.ok and report.quarantined() == [], report.mismatches
