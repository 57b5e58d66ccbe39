"""The one simulator protocol (DESIGN §6), used to build SFT records *and* to prompt simulators at
evaluation, so a model is trained on exactly what it is scored on.

Input: ``s_t`` (canonical JSON), ``a_t`` (tool name + JSON arguments) and ``code(a_t)``.
Output: JSON ``{"feedback": <observation>, "config_changes": [{"type": "add"|"modify"|"delete",
"path": [keys...], "value": ...}]}`` — applying the changes to ``s_t`` must give ``s'_t``.
"""

from __future__ import annotations

import ast
import copy
import functools
import json
from typing import Any, Iterable

from pipeline.state.canonical import canonicalize

PROTOCOL_VERSION = "envsim-protocol/2"  # 2: the state is given as its canonical (compact, sorted) JSON

SYSTEM_PROMPT = """You are an environment simulator for tool-using agents. You are given the current state of an \
environment as JSON, the action an agent takes (a tool name and its JSON arguments) and the Python source code \
of that tool. Predict exactly what executing the action does.

Answer with one JSON object and nothing else:
{"feedback": <the value the tool returns, as JSON>, "config_changes": [<change>, ...]}
"feedback" is the tool's return value (JSON; Python values written as JSON). Each change is {"type": "add" | "modify" | "delete", "path": [<key>, <key>, ...], "value": <new value>}:
"path" lists the object keys from the root of the state to the changed entry; "add" creates a key that did \
not exist, "modify" replaces the value at an existing key (lists are replaced whole), "delete" removes a key \
(omit "value"). If the call fails or only reads, the state does not change: use an empty list. If the tool \
raises an exception, the feedback is the string "Error: <message>"."""

USER_TEMPLATE = """## Current state
```json
{state}
```

## Action
Tool: {tool}
Arguments:
```json
{arguments}
```

## Tool source code
```python
{code}
```

Predict the feedback and the state changes as the JSON object described above."""

_SORTED = json.JSONEncoder(ensure_ascii=False, sort_keys=True)  # = json.dumps(..., ensure_ascii=False, sort_keys=True)
_OP_TO_TYPE = {"add": "add", "replace": "modify", "remove": "delete"}


class ChangeError(ValueError):
    """A predicted change that cannot be applied to the state."""


def user_prompt(state_json: str, tool: str, arguments_json: str, code: str | None) -> str:
    """The user message. ``state_json`` is inserted as it is: samples store states as canonical JSON
    (compact, sorted keys), so the prompt costs no re-serialisation of the state."""
    arguments = _SORTED.encode(json.loads(arguments_json))
    return USER_TEMPLATE.format(state=state_json, tool=tool, arguments=arguments, code=(code or "# source unavailable").rstrip())


def messages(sample: dict[str, Any]) -> list[dict[str, str]]:
    """System + user messages for a sample (a row of a split's ``samples.parquet``)."""
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": user_prompt(sample["state_before_json"], sample["tool"], sample["arguments_json"], sample["code"])},
    ]


def parse_observation(value: Any) -> Any:
    """An observation as a value: JSON, then Python literal, else the text itself (non-strings as
    they are). Feedback Match compares observations after this parse."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    try:
        return json.loads(text)
    except (ValueError, TypeError):
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return value


def feedback_of(sample: dict[str, Any]) -> Any:
    """The true feedback: the observation the agent saw, parsed (JSON, then Python literal), as JSON."""
    return canonicalize(parse_observation(sample["raw_observation"]))


def delta_to_changes(delta: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Stored Δ records (JSON-text values) -> protocol changes."""
    changes = []
    for rec in delta:
        change: dict[str, Any] = {"type": _OP_TO_TYPE[rec["op"]], "path": list(rec["path"])}
        if rec["op"] != "remove":
            change["value"] = json.loads(rec["after"])
        changes.append(change)
    return changes


@functools.lru_cache(maxsize=65536)
def _feedback_text(raw_observation: str) -> str:
    """Observations repeat a lot (the same error or confirmation); parse each distinct one once."""
    return _SORTED.encode(feedback_of({"raw_observation": raw_observation}))


def answer(sample: dict[str, Any]) -> str:
    """The target answer (assistant message) for a sample."""
    # = _SORTED.encode({"feedback": ..., "config_changes": ...}) with the feedback's text cached per observation
    return f'{{"config_changes": {_SORTED.encode(delta_to_changes(sample["delta"]))}, "feedback": {_feedback_text(sample["raw_observation"])}}}'


def apply_changes(state: Any, changes: Any) -> Any:
    """Apply predicted changes to a copy of ``state`` (exact Config Match semantics).

    Raises :class:`ChangeError` for anything that is not a well-formed change of this state.
    """
    if not isinstance(changes, list):
        raise ChangeError("config_changes must be a list")
    result = copy.deepcopy(state)
    for i, change in enumerate(changes):
        if not isinstance(change, dict):
            raise ChangeError(f"change {i} is not an object")
        kind, path = change.get("type"), change.get("path")
        if kind not in ("add", "modify", "delete"):
            raise ChangeError(f"change {i}: unknown type {kind!r}")
        if isinstance(path, str):
            path = [path]
        if not isinstance(path, list) or not path or not all(isinstance(k, str) for k in path):
            raise ChangeError(f"change {i}: path must be a non-empty list of keys")
        parent = result
        for key in path[:-1]:
            if not isinstance(parent, dict) or key not in parent:
                raise ChangeError(f"change {i}: path {path} does not exist in the state")
            parent = parent[key]
        if not isinstance(parent, dict):
            raise ChangeError(f"change {i}: parent of {path} is not an object")
        key = path[-1]
        if kind == "delete":
            if key not in parent:
                raise ChangeError(f"change {i}: cannot delete missing {path}")
            del parent[key]
            continue
        if "value" not in change:
            raise ChangeError(f"change {i}: {kind} without a value")
        if kind == "add" and key in parent:
            raise ChangeError(f"change {i}: add of existing {path}")
        if kind == "modify" and key not in parent:
            raise ChangeError(f"change {i}: modify of missing {path}")
        parent[key] = copy.deepcopy(change["value"])
    return result
