"""A small corpus written in the format EnvScaler publishes on the Hugging Face Hub
(``XXHStudyHard/EnvScaler-191-Env`` + ``-RL-Scenario`` / ``-SFT-Scenario``): lists of records, ``tools``,
``env_func_details`` and ``init_config`` as JSON strings, ``constraints_rules`` as a list. Its
environments read the clock, make uuids and draw random numbers, and have union-typed parameters."""

from __future__ import annotations

import json
from pathlib import Path

LEDGER_CODE = '''
from typing import Optional, List, Dict
import datetime
import random
import time
import uuid
from datetime import datetime as DT


class Ledger:
    """Accounts and time-stamped entries."""

    def __init__(self, init_config):
        self.accounts = init_config.get("accounts", {})
        self.entries = {}
        self.opened_at = DT.now().isoformat()

    def add_entry(self, account_id: str, amount: int, tags: Optional[List[str]] = None, meta: Optional[Dict] = None):
        """Book an amount on an account; the entry gets a fresh id, a timestamp and a reference."""
        if not isinstance(amount, int) or isinstance(amount, bool):
            raise TypeError(f"amount must be an integer, got {type(amount).__name__}")
        if tags is not None and not isinstance(tags, list):
            raise TypeError("tags must be a list")
        if meta is not None and not isinstance(meta, dict):
            raise TypeError("meta must be an object")
        if account_id not in self.accounts:
            return {"success": False, "error": f"unknown account {account_id}"}
        if amount <= 0:
            return {"success": False, "error": "amount must be positive"}
        entry_id = str(uuid.uuid4())
        self.entries[entry_id] = {"account_id": account_id, "amount": amount, "tags": tags or [],
                                  "booked_at": datetime.datetime.now().isoformat(), "epoch": int(time.time()),
                                  "ref": random.randint(100000, 999999), "meta": meta or {}}
        self.accounts[account_id]["balance"] += amount
        return {"success": True, "data": {"entry_id": entry_id}}

    def list_entries(self, account_id: str, limit: Optional[int] = None):
        """Entries of an account, oldest first, at most `limit` of them."""
        rows = [dict(e, entry_id=k) for k, e in self.entries.items() if e["account_id"] == account_id]
        return {"success": True, "data": rows[:limit]}

    def void_entry(self, entry_id: str):
        """Void an entry: its amount goes back and it is stamped."""
        entry = self.entries.get(entry_id)
        if entry is None:
            return {"success": False, "error": f"unknown entry {entry_id}"}
        if entry.get("voided_at"):
            return {"success": False, "error": "already voided"}
        entry["voided_at"] = DT.utcnow().isoformat()
        self.accounts[entry["account_id"]]["balance"] -= entry["amount"]
        return {"success": True}
'''

LEDGER_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "add_entry",
            "description": "Book an amount",
            "parameters": {
                "type": "object",
                "properties": {
                    "account_id": {"type": "string"},
                    "amount": {"type": "integer"},
                    "tags": {"type": ["array", "null"], "items": {"type": "string"}},
                    "meta": {
                        "type": ["object", "null"],
                        "properties": {"note": {"type": "string"}, "priority": {"type": "integer"}},
                    },
                },
                "required": ["account_id", "amount"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "list_entries",
            "description": "List entries",
            "parameters": {
                "type": "object",
                "properties": {"account_id": {"type": "string"}, "limit": {"type": ["integer", "null"]}},
                "required": ["account_id"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "void_entry",
            "description": "Void an entry",
            "parameters": {"type": "object", "properties": {"entry_id": {"type": "string"}}, "required": ["entry_id"]},
        },
    },
]

NOTEBOOK_CODE = '''
import uuid


class Notebook:
    """Notes with generated ids; builds from its class defaults."""

    def __init__(self, init_config=None):
        self.notes = {"N-1": {"text": "hello"}}

    def add_note(self, text: str):
        """Add a note."""
        note_id = uuid.uuid4().hex[:8]
        self.notes[note_id] = {"text": text}
        return {"success": True, "data": note_id}

    def delete_note(self, note_id: str):
        """Delete a note."""
        if note_id not in self.notes:
            return {"success": False, "error": "no such note"}
        del self.notes[note_id]
        return {"success": True}
'''

PID_CODE = '''
import os


class PidCounter:
    """Records which process served it: non-deterministic by construction."""

    def __init__(self, init_config):
        self.count = init_config.get("count", 0)
        self.served_by = None

    def bump(self, by: int):
        """Increase the count."""
        self.count += by
        self.served_by = os.getpid()
        return {"success": True, "data": self.count}
'''


def env_record(env_id: str, name: str, code: str, tools: list | None) -> dict:
    """One record as the Hub release has it (JSON strings where the release has them)."""
    return {
        "env_id": env_id,
        "environment_summary": name,
        "environment_introduction": f"The {name} environment.",
        "state_space_definition": [{"attributes": "...", "description": "..."}],
        "constraints_rules": ["Amounts are positive.", "Unknown ids are refused."],
        "operation_list": [{"operation_name": t["function"]["name"]} for t in tools or []],
        "env_class_name": name,
        "env_class_code": code,
        "env_class_def": f"class {name}: ...",
        "env_func_details": json.dumps(
            {t["function"]["name"]: {"doc": t["function"]["description"]} for t in tools or []}
        ),
        "tools": json.dumps(tools or []),
    }


def scenario_record(env_id: str, name: str, task_id: str, cfg: dict, checklist: bool = False) -> dict:
    row = {
        "env_id": env_id,
        "env_class_name": name,
        "task_id": task_id,
        "init_config": json.dumps(cfg),
        "task": f"Work on {task_id}.",
    }
    if checklist:
        row["checklist_with_func"] = [{"check_item": "a", "check_func": "def check_func(s):\n    return True"}]
    return row


def _accounts(n: int) -> dict:
    return {"accounts": {f"ACC-{i}": {"owner": f"owner {i}", "balance": 100 * i} for i in range(1, n + 1)}}


def hub_files(nondeterministic: bool = False) -> dict[str, list[dict]]:
    """{file name: records} of the three datasets."""
    if nondeterministic:
        return {
            "envs": [
                env_record(
                    "env_9_rl",
                    "PidCounter",
                    PID_CODE,
                    [
                        {
                            "type": "function",
                            "function": {
                                "name": "bump",
                                "description": "Increase",
                                "parameters": {
                                    "type": "object",
                                    "properties": {"by": {"type": "integer"}},
                                    "required": ["by"],
                                },
                            },
                        }
                    ],
                )
            ],
            "rl": [scenario_record("env_9_rl", "PidCounter", f"env_9_rl-task_{i}", {"count": i}) for i in range(1, 3)],
            "sft": [],
        }
    return {
        "envs": [
            env_record("env_1_sft", "Ledger", LEDGER_CODE, LEDGER_TOOLS),
            env_record("env_2_rl", "Ledger", LEDGER_CODE, LEDGER_TOOLS),
            env_record("env_3_sft", "Notebook", NOTEBOOK_CODE, None),
        ],  # tools derived from the methods
        "rl": [
            scenario_record("env_2_rl", "Ledger", f"env_2_rl-task_{i}", _accounts(i + 1), checklist=True)
            for i in range(1, 3)
        ],
        "sft": [scenario_record("env_1_sft", "Ledger", f"env_1_sft-task_{i}", _accounts(i)) for i in range(1, 4)],
    }


def write_hub_corpus(directory: Path, nondeterministic: bool = False, mixed: bool = False) -> tuple[Path, list[Path]]:
    """The corpus as downloaded files: env items (JSON list) and two scenario files (JSON list, JSON lines);
    ``mixed``: the good environments and the non-deterministic one together."""
    directory.mkdir(parents=True, exist_ok=True)
    files = hub_files(nondeterministic)
    if mixed:
        good = hub_files()
        files = {k: good[k] + files[k] for k in good}
    envs = directory / "EnvScaler-191-Env.json"
    envs.write_text(json.dumps(files["envs"], indent=1))
    rl = directory / "EnvScaler-RL-Scenario.json"
    rl.write_text(json.dumps(files["rl"], indent=1))
    sft = directory / "EnvScaler-SFT-Scenario.jsonl"
    sft.write_text("".join(json.dumps(r) + "\n" for r in files["sft"]))
    return envs, [rl, sft]


def write_dict_corpus(directory: Path) -> tuple[Path, Path]:
    """The same corpus in the dict format (``191_env_metadata.json``, decoded fields)."""
    directory.mkdir(parents=True, exist_ok=True)
    files = hub_files()
    items = {}
    for rec in files["envs"]:
        item = dict(rec)
        item["tools"] = json.loads(rec["tools"])
        item["env_func_details"] = json.loads(rec["env_func_details"])
        items[item.pop("env_id")] = item
    envs = directory / "191_env_metadata.json"
    envs.write_text(json.dumps(items))
    scenarios = directory / "scenarios.json"
    scenarios.write_text(
        json.dumps([dict(r, init_config=json.loads(r["init_config"])) for r in files["rl"] + files["sft"]])
    )
    return envs, scenarios
