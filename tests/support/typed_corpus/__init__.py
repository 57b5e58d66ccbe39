"""A typed corpus in EnvScaler's released format (``191_env_metadata.json`` + ``scenarios.json``), written for this
project: what a corpus converted from a typed code base looks like.

- ``phone_lines`` (:mod:`.phone_lines`): a pydantic database behind an annotated attribute (``db: PhoneDB``, the
  class's ``__init__`` takes no config), ``(str, Enum)`` / ``IntEnum`` / ``Flag`` fields and enum-keyed counts,
  tools that refuse by raising ``ValueError`` (the rule :data:`RAISES_RULE` labels them failure, shown as
  ``Error: <message>``), a decorator that turns a ``ValueError`` into that answer itself, a tool answering in the
  device's insertion order, tool schemas with ``$defs``/``$ref``, ``enum`` and a nested object; one scenario carries
  reference actions;
- ``ledger_untyped`` / ``ledger_typed`` (:mod:`.ledger`): plain account objects. Built as EnvScaler builds an
  environment, the untyped ledger holds dicts and nearly every call raises the same ``AttributeError``; the typed
  one declares ``env_constructor: from_config`` and works.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.user_corpora import env_item, write_released

HERE = Path(__file__).resolve().parent

#: the corpus's declared outcome rule: its tools refuse by raising, as tau2-bench's do
RAISES_RULE = {"raises": [{"type": ["ValueError", "ValidationError"], "observation": "Error: {message}"}]}
#: the enum classes of the phone lines: no state or observation may hold ``<class>.<member>``
ENUM_CLASSES = ("LineStatus", "Priority", "Permission")
#: the device's apps in the order they were installed (not sorted)
APPS = {"zoom": True, "maps": True, "camera": False}


def _fn(name: str, description: str, props: dict[str, Any], required: list[str], defs: dict | None = None) -> dict:
    params: dict[str, Any] = {"type": "object", "properties": props, "required": required}
    if defs:
        params["$defs"] = defs
    return {"type": "function", "function": {"name": name, "description": description, "parameters": params}}


LINE = {"line_id": {"type": "string", "description": "The line id."}}
PHONE_TOOLS = [
    _fn("get_line", "One line's details.", LINE, ["line_id"]),
    _fn(
        "set_line_status",
        "Change a line's status.",
        {**LINE, "status": {"$ref": "#/$defs/LineStatus"}},
        ["line_id", "status"],
        {"LineStatus": {"type": "string", "enum": ["Active", "Suspended", "Closed"]}},
    ),
    _fn(
        "set_priority",
        "Set a line's priority.",
        {**LINE, "priority": {"$ref": "#/$defs/Priority"}},
        ["line_id", "priority"],
        {"Priority": {"type": "integer", "enum": [1, 2, 3]}},
    ),
    _fn(
        "grant_permission",
        "Grant one permission to a line.",
        {**LINE, "permission": {"type": "string", "enum": ["CALLS", "DATA", "ROAMING"]}},
        ["line_id", "permission"],
    ),
    _fn(
        "set_apn_settings",
        "Set a line's APN settings.",
        {**LINE, "settings": {"$ref": "#/$defs/ApnSettings"}},
        ["line_id", "settings"],
        {
            "ApnSettings": {
                "type": "object",
                "properties": {"apn_name": {"type": "string"}, "mms": {"type": "boolean"}},
                "required": ["apn_name"],
            }
        },
    ),
    _fn(
        "port_number",
        "Move a line to another carrier.",
        {**LINE, "carrier": {"type": "string"}},
        ["line_id", "carrier"],
    ),
    _fn("install_app", "Install an app on the device.", {"name": {"type": "string"}}, ["name"]),
    _fn("check_installed_apps", "The device's apps, in the order they were installed.", {}, []),
]
LEDGER_TOOLS = [
    _fn("balance", "An account's balance.", {"account_id": {"type": "string"}}, ["account_id"]),
    _fn(
        "deposit",
        "Deposit into an account.",
        {"account_id": {"type": "string"}, "amount": {"type": "integer"}},
        ["account_id", "amount"],
    ),
    _fn("owners", "Every account's owner.", {}, []),
]


def _phone_db(k: int) -> dict[str, Any]:
    statuses = ["Active", "Suspended", "Active", "Closed"]
    lines = {
        f"L{i}": {"line_id": f"L{i}", "status": statuses[(i + k) % 4], "priority": 1 + (i + k) % 3, "permissions": 1}
        for i in range(1, 4 + k % 2)
    }
    counts: dict[str, int] = {}
    for line in lines.values():
        counts[line["status"]] = counts.get(line["status"], 0) + 1
    return {"lines": lines, "device": {"apps": dict(APPS), "network_mode": "4g"}, "status_counts": counts}


def typed_corpus(scenarios: int = 6) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The phone lines (``scenarios`` scenarios, the first with reference actions) and the two ledgers (3 each)."""
    phone = (HERE / "phone_lines.py").read_text()
    ledger = (HERE / "ledger.py").read_text()
    items = {
        "phone_lines": env_item("PhoneLines", phone, PHONE_TOOLS, "Phone lines of one account."),
        "ledger_untyped": env_item("Ledger", ledger, LEDGER_TOOLS, "Accounts and balances."),
        "ledger_typed": {
            **env_item("Ledger", ledger, LEDGER_TOOLS, "Accounts and balances."),
            "env_constructor": "from_config",
        },
    }
    out = [
        {
            "task_id": f"phone-{k}",
            "env_id": "phone_lines",
            "env_class_name": "PhoneLines",
            "init_config": {"db": _phone_db(k)},
            "task": "Look after the account's lines.",
        }
        for k in range(scenarios)
    ]
    out[0]["reference_actions"] = [
        {"name": "set_line_status", "arguments": {"line_id": "L1", "status": "Active"}},
        {"name": "grant_permission", "arguments": {"line_id": "L2", "permission": "DATA"}},
        {"name": "install_app", "arguments": {"name": "notes"}},
    ]
    for env_id in ("ledger_untyped", "ledger_typed"):
        out += [
            {
                "task_id": f"{env_id}-{k}",
                "env_id": env_id,
                "env_class_name": "Ledger",
                "init_config": {
                    "accounts": {f"A{i}": {"owner": f"owner {i}", "balance": 10 * i + k} for i in range(1, 4)}
                },
                "task": "Keep the ledger.",
            }
            for k in range(3)
        ]
    return items, out


def write_typed_corpus(directory: Path, **kwargs: Any) -> tuple[Path, Path]:
    return write_released(directory, *typed_corpus(**kwargs))
