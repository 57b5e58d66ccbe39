"""A corpus in EnvScaler's released layout with planted defects beside good environments (issue 35): the
quality gate must name each defect on the right environment and tool, fail the planted-bad environments and
pass the good ones.

- ``ledger`` (``Ledger.post_entry``): a tool that always raises (``KeyError``: it reads a book that never exists);
- ``kiosk`` (``Kiosk.sell`` / ``Kiosk.refund`` / ``Kiosk.note_sale``): the schema of ``sell`` declares ``note``,
  which the code does not accept; ``refund`` requires ``reason``, which its schema does not declare (both caught
  by the loader's check of the schemas); ``note_sale(**fields)`` passes its schema's ``memo`` on to a method that
  does not take it (a ``TypeError`` at every call: only the calls show it);
- ``gallery`` (``Gallery``): read-only, no call can change its state;
- ``tagger`` (``Tagger.tag``): non-deterministic, it stores a fresh object's address;
- ``notes`` (:data:`tests.support.user_corpora.TINY`), ``shelf`` and ``journal``: the good ones.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from pipeline.collect.explore import ExploreSettings
from pipeline.collect.run import collect_all
from pipeline.collect.sources import SourceConfig, env_items
from pipeline.envs.catalog import build_catalog
from pipeline.envs.config import EnvScalerCorpus
from pipeline.envs.registry import sources_config
from pipeline.execution.child import Limits
from pipeline.execution.sandbox import Sandbox
from pipeline.labeling.determinism import check_determinism
from pipeline.labeling.steps import label
from pipeline.select.stratify import stratify
from pipeline.store.layout import DataLayout
from tests.support.parallel import built_once, run_base
from tests.support.user_corpora import TINY, _fn, env_item, write_released

LEDGER = '''
class Ledger:
    """Accounts and their entries."""

    def __init__(self, init_config=None):
        self.accounts = (init_config or {}).get("accounts", {"cash": 100, "bank": 500})
        self.books = {}

    def balance(self, account: str):
        """One account's balance.

        Args:
            account (str): Account name.
        """
        if account not in self.accounts:
            return {"success": False, "error": "no such account"}
        return {"success": True, "data": self.accounts[account]}

    def transfer(self, source: str, target: str, amount: int):
        """Move money between accounts.

        Args:
            source (str): From.
            target (str): To.
            amount (int): How much.
        """
        if source not in self.accounts or target not in self.accounts:
            return {"success": False, "error": "no such account"}
        if not isinstance(amount, int) or amount <= 0 or self.accounts[source] < amount:
            return {"success": False, "error": "invalid amount"}
        self.accounts[source] -= amount
        self.accounts[target] += amount
        return {"success": True}

    def post_entry(self, account: str, amount: int):
        """Post an entry to the main book.

        Args:
            account (str): Account name.
            amount (int): Amount.
        """
        book = self.books["main"]
        book.append((account, amount))
        return {"success": True}
'''

KIOSK = '''
class Kiosk:
    """A snack kiosk."""

    def __init__(self, init_config=None):
        self.stock = (init_config or {}).get("stock", {"chips": 5, "soda": 3})
        self.till = 0

    def stock_of(self, item: str):
        """Units left.

        Args:
            item (str): Item name.
        """
        if item not in self.stock:
            return {"success": False, "error": "unknown item"}
        return {"success": True, "data": self.stock[item]}

    def sell(self, item: str, count: int):
        """Sell units of an item.

        Args:
            item (str): Item name.
            count (int): Units.
        """
        if item not in self.stock:
            return {"success": False, "error": "unknown item"}
        if not isinstance(count, int) or count < 1 or self.stock[item] < count:
            return {"success": False, "error": "invalid count"}
        self.stock[item] -= count
        self.till += count
        return {"success": True}

    def refund(self, item: str, reason: str):
        """Take one unit back.

        Args:
            item (str): Item name.
            reason (str): Why.
        """
        if item not in self.stock:
            return {"success": False, "error": "unknown item"}
        self.stock[item] += 1
        self.till -= 1
        return {"success": True}

    def restock(self, item: str):
        """One more unit of an item.

        Args:
            item (str): Item name.
        """
        self.stock[item] = self.stock.get(item, 0) + 1
        return {"success": True}

    def note_sale(self, **fields):
        """Note a sale (the fields go to _note)."""
        return self._note(**fields)

    def _note(self, text: str):
        self.till += 0
        return {"success": True, "data": text}
'''

KIOSK_TOOLS = [
    _fn("stock_of", "Units left.", {"item": {"type": "string"}}, ["item"]),
    _fn(
        "sell",
        "Sell units.",
        {"item": {"type": "string"}, "count": {"type": "integer"}, "note": {"type": "string"}},
        ["item", "count", "note"],
    ),
    _fn("refund", "Take one unit back.", {"item": {"type": "string"}}, ["item"]),
    _fn("restock", "One more unit.", {"item": {"type": "string"}}, ["item"]),
    _fn("note_sale", "Note a sale.", {"memo": {"type": "string"}}, ["memo"]),
]

GALLERY = '''
class Gallery:
    """Paintings on show (read-only)."""

    def __init__(self, init_config=None):
        self.paintings = (init_config or {}).get("paintings", {"p1": "Sunflowers", "p2": "Starry Night"})

    def list_paintings(self):
        """Every painting."""
        return {"success": True, "data": self.paintings}

    def painting(self, painting_id: str):
        """One painting.

        Args:
            painting_id (str): The painting id.
        """
        if painting_id not in self.paintings:
            return {"success": False, "error": "no such painting"}
        return {"success": True, "data": self.paintings[painting_id]}
'''

TAGGER = '''
class Tagger:
    """Tags with a fresh token (an object's address: different in every process)."""

    def __init__(self, init_config=None):
        self.tags = []

    def tag(self, label: str):
        """Tag with a fresh token.

        Args:
            label (str): Tag label.
        """
        self.tags.append({"label": label, "token": id(object())})
        return {"success": True, "data": len(self.tags)}
'''

SHELF = '''
class Shelf:
    """Items on a shelf."""

    def __init__(self, init_config=None):
        self.items = (init_config or {}).get("items", {"lamp": 1})

    def put(self, name: str):
        """Put one item on the shelf.

        Args:
            name (str): Item name.
        """
        self.items[name] = self.items.get(name, 0) + 1
        return {"success": True, "data": self.items[name]}

    def take(self, name: str):
        """Take one item off the shelf.

        Args:
            name (str): Item name.
        """
        if not self.items.get(name):
            return {"success": False, "error": "not on the shelf"}
        self.items[name] -= 1
        return {"success": True}

    def count(self):
        """Items on the shelf."""
        return {"success": True, "data": sum(self.items.values())}
'''

JOURNAL = '''
class Journal:
    """A journal of entries."""

    def __init__(self, init_config=None):
        self.entries = list((init_config or {}).get("entries", []))
        self.closed = False

    def write(self, text: str):
        """Add an entry.

        Args:
            text (str): The entry.
        """
        if self.closed:
            return {"success": False, "error": "journal closed"}
        self.entries.append(text)
        return {"success": True, "data": len(self.entries)}

    def read(self):
        """Every entry."""
        return {"success": True, "data": self.entries}

    def close(self):
        """Close the journal."""
        if self.closed:
            return {"success": False, "error": "already closed"}
        self.closed = True
        return {"success": True}
'''

#: the planted defects: environment -> (tool or None, what the report must say)
#: the environment the determinism check quarantines (its labels hold a fresh object's address)
QUARANTINED = "envscaler/tagger"
BAD = {
    "envscaler/ledger": ("post_entry", "always raises"),
    "envscaler/kiosk": ("sell", "mismatch"),
    "envscaler/gallery": (None, "cannot change state"),
    "envscaler/tagger": (None, "non-deterministic"),
}
GOOD = ["envscaler/journal", "envscaler/notes", "envscaler/shelf"]


def defect_corpus(scenarios_per_env: int = 2) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The environments (planted-bad and good) and their scenarios."""
    cls, code, tools = TINY["notes"]
    items = {
        "notes": env_item(cls, code, tools),
        "shelf": env_item("Shelf", SHELF),
        "journal": env_item("Journal", JOURNAL),
    }
    items.update(
        {
            "ledger": env_item("Ledger", LEDGER),
            "kiosk": env_item("Kiosk", KIOSK, KIOSK_TOOLS),
            "gallery": env_item("Gallery", GALLERY),
            "tagger": env_item("Tagger", TAGGER),
        }
    )
    scenarios = [
        {
            "task_id": f"{env_id}-{k}",
            "env_id": env_id,
            "env_class_name": item["env_class_name"],
            "init_config": {},
            "task": f"Use the {item['env_class_name']}.",
        }
        for env_id, item in items.items()
        for k in range(scenarios_per_env)
    ]
    return items, scenarios


def write_defect_corpus(directory: Path, **kwargs: Any) -> tuple[Path, Path]:
    return write_released(directory, *defect_corpus(**kwargs))


def build_defect_layout(root: Path, call_budget: int = 300) -> tuple[DataLayout, EnvScalerCorpus]:
    """The defect corpus written under ``root``, collected, labeled (every label kept from collection), checked
    for determinism in a sandbox of its own (other worker processes, other addresses: the tagger is caught) and
    stratified, as the default job does before the quality gate."""
    corpus = EnvScalerCorpus(*write_defect_corpus(root / "corpus"))
    cfg = sources_config(bfcl={"categories": [], "replay": False}, builtin={"enabled": False}, envscaler=[corpus])
    layout = DataLayout.at(root / "data")
    items, issues = env_items(cfg)
    build_catalog(layout, items, issues, disabled=("bfcl",))
    explore = ExploreSettings(
        seed=5, call_budget=call_budget, batch_episodes=8, min_envs=1, episode_length=5, mutate_rate=0.1
    )
    with Sandbox(workers=2, limits=Limits(call_timeout_s=10)) as box:
        collect_all(cfg, layout, box, explore)
        label(layout, box)
    with Sandbox(workers=2, limits=Limits(call_timeout_s=10)) as box:
        check_determinism(layout, box, sample_size=0)
    stratify(layout)
    return layout, corpus


def shared_defect_layout(tmp_path_factory: Any, name: str) -> tuple[DataLayout, EnvScalerCorpus]:
    """:func:`build_defect_layout` made once per test run (the first module that asks builds it, under xdist the
    others wait and reuse it) and copied to a directory of the caller's own, with the shared corpus files."""
    built = built_once(run_base(tmp_path_factory), "defect-layout", build_defect_layout)
    layout = DataLayout.at(tmp_path_factory.mktemp(name) / "data")
    shutil.copytree(built / "data", layout.root)
    corpus = built / "corpus"
    return layout, EnvScalerCorpus(corpus / "191_env_metadata.json", corpus / "scenarios.json")
