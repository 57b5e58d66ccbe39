"""The simulator prompt protocol (docs/definitions.md §6), used to build SFT records *and* to prompt simulators at
evaluation, so a model is trained on exactly what it is scored on. Two templates (:data:`TEMPLATES`):

* ``envsim`` (default): system prompt + user prompt with the current time (the frozen wall clock during the
  action; none without a recorded time), ``s_t``, ``a_t`` and ``code(a_t)``;
* ``envsimbench``: the EnvSimBench evaluation prompt, byte for byte as the reference writes it (an imported
  sample's state and arguments as published), so published numbers can be reproduced; it states no time.

Model-facing text writes the environment's own values, never the canonical encoding's markers (:func:`plain`).
"""

from __future__ import annotations

import ast
import copy
import functools
import json
import re
from collections.abc import Iterable
from contextlib import suppress
from datetime import UTC
from typing import Any

from pipeline.core.bounds import long_path
from pipeline.core.canonical import canonical_json, canonicalize
from pipeline.core.clock import parse_time

PROTOCOL_VERSION = "envsim-protocol/4"  # 4: the envsim prompt states the current time; 3: plain values, two templates
TEMPLATES = ("envsim", "envsimbench")
DEFAULT_TEMPLATE = "envsim"

SYSTEM_PROMPT = """You are an environment simulator for tool-using agents. You are given the current state of an \
environment as JSON, the action an agent takes (a tool name and its JSON arguments) and the Python source code \
of that tool. Predict exactly what executing the action does.

Answer with one JSON object and nothing else:
{"feedback": <the value the tool returns, as JSON>, "config_changes": [<change>, ...]}
"feedback" is the tool's return value (JSON; Python values written as JSON). Each change is {"type": "add" | \
"modify" | "delete", "path": [<key>, <key>, ...], "value": <new value>}:
"path" lists the object keys from the root of the state to the changed entry; "add" creates a key that did \
not exist, "modify" replaces the value at an existing key (lists are replaced whole), "delete" removes a key \
(omit "value"). If the call fails or only reads, the state does not change: use an empty list. If the tool \
raises an exception, the feedback is the string "Error: <message>". When a current time is given, the \
environment's clock reads exactly that time for the whole call (datetime.now(), time.time()…)."""

TIME_SECTION = """## Current time
{iso} (UTC; datetime.now() = {naive}, time.time() = {epoch})

"""

USER_TEMPLATE = """{time}## Current state
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

#: the EnvSimBench evaluation prompt (its evaluation script's system and user messages)
ENVSIMBENCH_SYSTEM_TEMPLATE = (
    "Environment code:\n\n{env_code}\n\nInitial config:\n{config}\n\n"
    "Instructions: You are given the environment code and the initial config. "
    "A tool call will be provided; you must predict the environment's textual feedback "
    "(exact output string) and any configuration changes that result from executing the tool. "
    "Only report config changes using types: add, modify, delete. "
    "Output ONLY a JSON object with keys: "
    '"feedback": string, "config_changes": [{{"type":..., "path":..., "value": ...}}]. '
    'If no config change, set "config_changes": []. '
    "Do not output other text. Do not repeat the JSON. Output exactly one JSON object and stop."
)
ENVSIMBENCH_USER_TEMPLATE = "Tool call: {call}\n\nReturn the JSON as specified."

_SORTED = json.JSONEncoder(ensure_ascii=False, sort_keys=True)  # = json.dumps(..., ensure_ascii=False, sort_keys=True)
_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)  # canonical layout, key order kept, NaN allowed
_OP_TO_TYPE = {"add": "add", "replace": "modify", "remove": "delete"}
_MARKERS = {"$int", "$float", "$decimal", "$bytes", "$complex", "$repr"}


class ChangeError(ValueError):
    """A predicted change that cannot be applied to the state."""


def plain(value: Any) -> Any:
    """A canonical value with the environment's own values instead of the canonical markers: ``$int`` → the
    integer, ``$float`` / ``$decimal`` → the float, ``$complex`` / ``$repr`` / ``$bytes`` → their text. Its
    ``canonicalize`` is the canonical form again except for decimals (they become floats): compare plain forms on
    both sides."""
    if isinstance(value, list):
        return [plain(v) for v in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1:
        ((key, text),) = value.items()
        if key in _MARKERS and isinstance(text, str):
            with suppress(ValueError):
                if key == "$int":
                    return int(text)
                if key in ("$float", "$decimal"):
                    return float(text)
            return text
    return {k: plain(v) for k, v in value.items()}


def json_copy(state: Any) -> Any:
    """A copy of a JSON state made through its text, at C speed (``copy.deepcopy`` takes seconds on a 5 MB state);
    a value JSON cannot write is deep-copied."""
    try:
        return json.loads(_COMPACT.encode(state))
    except (TypeError, ValueError):
        return copy.deepcopy(state)


def plain_text(canonical_json_text: str) -> str:
    """The compact JSON of a canonical JSON text's :func:`plain` value, in the text's key order (the text itself
    when it holds no marker, which is the common case: no re-serialisation)."""
    if '"$' not in canonical_json_text:
        return canonical_json_text
    return _COMPACT.encode(plain(json.loads(canonical_json_text)))


@functools.lru_cache(maxsize=4096)
def time_section(current_time: Any) -> str:
    """The user prompt's "Current time" section for an ISO 8601 time (empty without one): the time with
    its offset, the naive UTC ``datetime.now()`` the environment saw and the ``time.time()`` epoch."""
    if not isinstance(current_time, str) or not current_time:  # None, or NaN from a pandas row
        return ""
    utc = parse_time(current_time, "current_time").astimezone(UTC)
    epoch = utc.timestamp()
    return TIME_SECTION.format(
        iso=utc.isoformat(),
        naive=utc.replace(tzinfo=None).isoformat(sep=" "),
        epoch=int(epoch) if epoch == int(epoch) else epoch,
    )


def user_prompt(
    state_json: str, tool: str, arguments_json: str, code: str | None, current_time: str | None = None
) -> str:
    """The ``envsim`` user message. ``state_json`` is canonical JSON (compact, in the state's own key order); it is
    inserted as it is unless it holds canonical markers, which are written as plain values.
    ``current_time`` (the sample's frozen wall clock, ISO 8601) becomes the "Current time" section."""
    return USER_TEMPLATE.format(
        time=time_section(current_time),
        state=plain_text(state_json),
        tool=tool,
        arguments=_SORTED.encode(plain(json.loads(arguments_json))),
        code=(code or "# source unavailable").rstrip(),
    )


def tool_call(tool: str, arguments_json: str) -> str:
    """``name({json args})`` as the reference writes a tool call."""
    return f"{tool}({json.dumps(plain(json.loads(arguments_json)), ensure_ascii=False)})"


def _published(sample: dict[str, Any], name: str, own: str) -> Any:
    """An imported sample's ``published_<name>_json`` as published (in its own key order), else ``own``, plain."""
    published = sample.get(f"published_{name}_json")
    return json.loads(published) if isinstance(published, str) else plain(json.loads(sample[own]))


def envsimbench_messages(sample: dict[str, Any]) -> list[dict[str, str]]:
    """The EnvSimBench evaluation prompt for a sample (the whole class source in ``env_code``); an imported sample's
    published texts are shown in their own key order, so the prompt equals the reference's byte for byte."""
    env_code = sample.get("env_code")
    if not env_code:
        raise ValueError(
            f"{sample.get('step_id')}: the envsimbench prompt needs the whole class source of "
            f"{sample.get('env_id')!r} (env_code); load samples with pipeline.evaluate.samples.load_samples"
        )
    config = json.dumps(_published(sample, "state", "state_before_json"), ensure_ascii=False, indent=2)
    call = f"{sample['tool']}({json.dumps(_published(sample, 'arguments', 'arguments_json'), ensure_ascii=False)})"
    return [
        {"role": "system", "content": ENVSIMBENCH_SYSTEM_TEMPLATE.format(env_code=env_code, config=config)},
        {"role": "user", "content": ENVSIMBENCH_USER_TEMPLATE.format(call=call)},
    ]


def messages(sample: dict[str, Any], template: str = DEFAULT_TEMPLATE) -> list[dict[str, str]]:
    """System + user messages for a sample (a row of a split's ``samples.parquet``) in a template."""
    if template == "envsimbench":
        return envsimbench_messages(sample)
    if template != "envsim":
        raise ValueError(f"unknown prompt template {template!r}; known: {', '.join(TEMPLATES)}")
    state, tool, arguments = sample["state_before_json"], sample["tool"], sample["arguments_json"]
    user = user_prompt(state, tool, arguments, sample["code"], sample.get("current_time"))
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def parse_observation(value: Any) -> Any:
    """An observation as a value: JSON, then Python literal, else the text itself (non-strings as
    they are). Feedback Match compares observations after this parse."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    with suppress(ValueError, TypeError):
        return json.loads(text)
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return value


def feedback_of(sample: dict[str, Any]) -> Any:
    """The true feedback: the observation the agent saw, parsed (JSON, then Python literal), as plain
    JSON values (big ints as numbers, not ``$int`` markers)."""
    return plain(canonicalize(parse_observation(sample["raw_observation"])))


def delta_to_changes(delta: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Stored Δ records (canonical JSON-text values) -> protocol changes with plain values."""
    return [
        {"type": _OP_TO_TYPE[rec["op"]], "path": list(rec["path"])}
        | ({} if rec["op"] == "remove" else {"value": plain(json.loads(rec["after"]))})
        for rec in delta
    ]


@functools.lru_cache(maxsize=65536)
def _feedback_text(raw_observation: str) -> str:
    """Observations repeat a lot (the same error or confirmation); parse each distinct one once."""
    return _SORTED.encode(feedback_of({"raw_observation": raw_observation}))


def answer(sample: dict[str, Any]) -> str:
    """The target answer (assistant message) for a sample, in our answer format."""
    # = _SORTED.encode({"feedback": ..., "config_changes": ...}) with the feedback's text cached per observation
    return (
        f'{{"config_changes": {_SORTED.encode(delta_to_changes(sample["delta"]))}, "feedback": '
        f"{_feedback_text(sample['raw_observation'])}}}"
    )


#: change types accepted in answers: ours (add / modify / delete), the reference SFT data's
#: (added / modified / removed) and Δ's own op names (replace / remove)
CHANGE_TYPES = {
    **dict.fromkeys(("add", "added"), "add"),
    **dict.fromkeys(("modify", "modified", "replace"), "modify"),
    **dict.fromkeys(("delete", "removed", "remove"), "delete"),
}


def _index(key: Any, size: int, extra: int = 0) -> int | None:
    """``key`` as a list index in ``range(size + extra)`` (an int, or a string of digits), else None."""
    if isinstance(key, str) and key.isdigit():
        key = int(key)
    elif not isinstance(key, int) or isinstance(key, bool):
        return None
    return key if 0 <= key < size + extra else None


def resolve_path(state: Any, path: Any, kind: str) -> list[Any]:
    """An answer's path as a list of keys / list indices: a list as it is; a dotted string resolved against
    ``state`` (keys may contain dots): the first grouping of its parts into keys (fewest dots per key first) that
    leads to an existing entry (``modify`` / ``delete``) or an existing parent without that key (``add``), else the
    plain split."""
    if isinstance(path, list):
        return path
    if not isinstance(path, str):
        raise ChangeError(f"path must be a dotted string or a non-empty list of keys, not {type(path).__name__}")
    parts = path.split(".")
    found = _resolve(state, parts, 0, kind)
    return found if found is not None else parts


def _resolve(node: Any, parts: list[str], i: int, kind: str) -> list[Any] | None:
    for j in range(i + 1, len(parts) + 1):
        key = ".".join(parts[i:j])
        last = j == len(parts)
        if isinstance(node, dict):
            if last:
                if (key not in node) if kind == "add" else (key in node):
                    return [key]
            elif key in node:
                rest = _resolve(node[key], parts, j, kind)
                if rest is not None:
                    return [key, *rest]
        elif isinstance(node, list):
            idx = _index(key, len(node), 1 if last and kind == "add" else 0)
            if idx is None:
                continue
            if last:
                return [idx]
            rest = _resolve(node[idx], parts, j, kind)
            if rest is not None:
                return [idx, *rest]
    return None


def change_value(change: dict[str, Any]) -> tuple[bool, Any]:
    """``(present, value)`` of a change: ``value``, else the reference format's ``after``."""
    for key in ("value", "after"):
        if key in change:
            return True, change[key]
    return False, None


def apply_changes(state: Any, changes: Any) -> Any:
    """Apply predicted changes, in order, to a copy of ``state`` (exact Config Match semantics), in our answer
    format or the reference's (:data:`CHANGE_TYPES`, dotted paths: :func:`resolve_path`, list indices: ``add``
    inserts, ``modify`` replaces, ``delete`` removes; the value in ``value`` or ``after``); :class:`ChangeError`
    for anything that is not a well-formed change of this state."""
    if not isinstance(changes, list):
        raise ChangeError("config_changes must be a list")
    result = json_copy(state)
    for i, change in enumerate(changes):
        if not isinstance(change, dict):
            raise ChangeError(f"change {i} is not an object")
        kind = CHANGE_TYPES.get(change.get("type")) if isinstance(change.get("type"), str) else None
        if kind is None:
            raise ChangeError(f"change {i}: unknown type {change.get('type')!r}")
        try:
            path = resolve_path(result, change.get("path"), kind)
        except ChangeError as exc:
            raise ChangeError(f"change {i}: {exc}") from None
        if not path or not all(isinstance(k, (str, int)) and not isinstance(k, bool) for k in path):
            raise ChangeError(f"change {i}: path must be a non-empty list of keys")
        parent = result
        for key in path[:-1]:
            if isinstance(parent, dict) and str(key) in parent:
                parent = parent[str(key)]
            elif isinstance(parent, list) and _index(key, len(parent)) is not None:
                parent = parent[_index(key, len(parent))]
            else:
                raise ChangeError(f"change {i}: path {path} does not exist in the state")
        has_value, value = change_value(change)
        if kind != "delete" and not has_value:
            raise ChangeError(f"change {i}: {kind} without a value")
        if isinstance(parent, list):
            idx = _index(path[-1], len(parent), 1 if kind == "add" else 0)
            if idx is None:
                raise ChangeError(f"change {i}: no list position {path[-1]!r} for {kind} at {path}")
            if kind == "delete":
                del parent[idx]
            elif kind == "add":
                parent.insert(idx, copy.deepcopy(value))
            else:
                parent[idx] = copy.deepcopy(value)
            continue
        if not isinstance(parent, dict):
            raise ChangeError(f"change {i}: parent of {path} is not an object")
        key = str(path[-1])
        if kind == "delete":
            if key not in parent:
                raise ChangeError(f"change {i}: cannot delete missing {path}")
            del parent[key]
            continue
        if kind == "add" and key in parent:
            raise ChangeError(f"change {i}: add of existing {path}")
        if kind == "modify" and key not in parent:
            raise ChangeError(f"change {i}: modify of missing {path}")
        parent[key] = copy.deepcopy(value)
    return result


#: how JSON text writes a float Python's ``==`` cannot compare
_NON_FINITE = re.compile(r"NaN|Infinity")


def non_finite_free(*texts: str) -> bool:
    """Whether none of the JSON ``texts`` writes a NaN or an infinity (then Python's ``==`` on the values they hold
    agrees with their canonical JSON; see :func:`reproduces`)."""
    return not any(_NON_FINITE.search(t) for t in texts)


def reproduces(before: Any, after: Any, changes: Any, nan_free: bool = False) -> tuple[bool, str | None]:
    """Exact Config Match of plain states: ``(changes applied to before give after, why they do not apply)``, equal
    as canonical JSON. With ``nan_free`` (:func:`non_finite_free` of their texts), Python's ``==`` rules out the
    rest first at C speed, and only equal ones are told apart by type by their canonical text."""
    too_long = long_path(changes)
    if too_long:
        return False, too_long
    try:
        predicted = apply_changes(before, changes)
    except ChangeError as exc:
        return False, str(exc)
    if not nan_free:
        return _canonical(predicted) == _canonical(after), None
    if predicted != after:
        return False, None
    try:
        return canonical_json(predicted) == canonical_json(after), None  # plain JSON values: canonical as they are
    except (TypeError, ValueError):
        return _canonical(predicted) == _canonical(after), None


def _canonical(value: Any) -> str:
    return canonical_json(canonicalize(value))
