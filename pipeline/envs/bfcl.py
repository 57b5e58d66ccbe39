"""Adapter for the multi-turn environments of the ``bfcl-eval`` package (Apache-2.0).

A bfcl task involves several classes (file system + Twitter, …); like bfcl's own executor
(``multi_turn_utils.execute_multi_turn_func_call``) we build one *composite* environment:
each involved class is instantiated, ``_load_scenario(deepcopy(cfg), long_context=…)`` is called
(not for stateless classes), and tool names map to the instance of the last class defining them.
State = the public attributes of each involved instance, keyed by class name — what bfcl's
``state_checker`` compares.
"""

from __future__ import annotations

import copy
import importlib
import inspect
import json
from contextlib import suppress
from functools import cache
from importlib import metadata, resources
from pathlib import Path
from typing import Any

from pipeline.core.canonical import JSONValue, canonicalize
from pipeline.core.environment import CallResult
from pipeline.core.outcome import default_outcome

SOURCE = "bfcl"
LICENSE = "Apache-2.0"
PINNED_VERSION = "2026.3.23"
CATEGORIES = ("base", "long_context", "miss_func", "miss_param")

_PREFIX = "bfcl_eval.eval_checker.multi_turn_eval.func_source_code"
#: class name -> (module, tool-doc file)
CLASSES: dict[str, tuple[str, str]] = {
    "GorillaFileSystem": ("gorilla_file_system", "gorilla_file_system.json"),
    "MathAPI": ("math_api", "math_api.json"),
    "MessageAPI": ("message_api", "message_api.json"),
    "TwitterAPI": ("posting_api", "posting_api.json"),
    "TicketAPI": ("ticket_api", "ticket_api.json"),
    "TradingBot": ("trading_bot", "trading_bot.json"),
    "TravelAPI": ("travel_booking", "travel_booking.json"),
    "VehicleControlAPI": ("vehicle_control", "vehicle_control.json"),
}
STATELESS = frozenset({"MathAPI"})


class BfclUnavailable(RuntimeError):
    """bfcl-eval is missing or not the pinned version."""


def installed_version() -> str:
    try:
        return metadata.version("bfcl-eval")
    except metadata.PackageNotFoundError:
        raise BfclUnavailable(
            f"bfcl-eval is not installed; install it without its dependencies: "
            f"pip install --no-deps bfcl-eval=={PINNED_VERSION} mpmath"
        ) from None


def data_dir() -> Path:
    installed_version()
    return Path(str(resources.files("bfcl_eval") / "data"))


def env_id_for(classes: list[str]) -> str:
    """Environment id of a composite: ``bfcl/<Class>+<Class>`` (sorted, order-independent)."""
    return f"{SOURCE}/" + "+".join(sorted(classes))


@cache
def env_class(name: str) -> type:
    module = importlib.import_module(f"{_PREFIX}.{CLASSES[name][0]}")
    return getattr(module, name)


def preload() -> None:
    """Import every environment module (done once in sandbox zygotes before forking)."""
    for name in CLASSES:
        env_class(name)
        class_tools(name)


_TYPE_MAP = {"dict": "object", "float": "number", "tuple": "array", "any": None}


def _to_json_schema(node: Any) -> Any:
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key == "type" and isinstance(value, str):
                mapped = _TYPE_MAP.get(value, value)
                if mapped is not None:
                    out[key] = mapped
            else:
                out[key] = _to_json_schema(value)
        return out
    if isinstance(node, list):
        return [_to_json_schema(v) for v in node]
    return node


@cache
def class_tools(name: str) -> tuple[dict[str, Any], ...]:
    """OpenAI function schemas of one class, from bfcl's own tool docs."""
    path = data_dir() / "multi_turn_func_doc" / CLASSES[name][1]
    with path.open() as fh:
        docs = [json.loads(line) for line in fh if line.strip()]
    return tuple(
        {
            "type": "function",
            "function": {
                "name": doc["name"],
                "description": doc.get("description", ""),
                "parameters": _to_json_schema(doc.get("parameters", {"type": "dict"})),
            },
        }
        for doc in docs
    )


class BfclEnvironment:
    """Composite of the bfcl classes a task involves."""

    def __init__(self, classes: list[str], excluded_tools: list[str] | None = None) -> None:
        unknown = [c for c in classes if c not in CLASSES]
        if unknown:
            raise KeyError(f"unknown bfcl class(es) {unknown}; known: {', '.join(CLASSES)}")
        if not classes:
            raise ValueError("a bfcl environment needs at least one class")
        self.classes = list(classes)
        self.env_id = env_id_for(self.classes)
        self.excluded = frozenset(excluded_tools or ())
        self._owner = {t["function"]["name"]: c for c in self.classes for t in class_tools(c)}  # later class wins
        self._instances: dict[str, Any] = {}

    # -- protocol -------------------------------------------------------------------------
    @property
    def tools(self) -> list[dict[str, Any]]:
        seen = {}
        for cls_name in self.classes:
            for tool in class_tools(cls_name):
                name = tool["function"]["name"]
                if name not in self.excluded and self._owner[name] == cls_name:
                    seen[name] = tool
        return list(seen.values())

    def has_tool(self, name: str) -> bool:
        return name in self._owner and not name.startswith("_")

    def reset(self, init_config: dict[str, Any], long_context: bool = False, **_: Any) -> None:
        self._instances = {}
        for cls_name in self.classes:
            instance = env_class(cls_name)()
            if cls_name not in STATELESS:
                instance._load_scenario(copy.deepcopy(init_config.get(cls_name, {})), long_context=long_context)
            self._instances[cls_name] = instance

    def bind_arguments(self, name: str, args: list[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
        signature = inspect.signature(getattr(env_class(self._owner[name]), name))
        bound_args = dict(signature.bind(None, *args, **kwargs).arguments)
        bound_args.pop(next(iter(signature.parameters)), None)  # self
        for key, value in list(bound_args.items()):
            param = signature.parameters[key]
            if param.kind is inspect.Parameter.VAR_KEYWORD:
                bound_args.pop(key)
                bound_args.update(value)
            elif param.kind is inspect.Parameter.VAR_POSITIONAL:
                raise TypeError(f"{name} takes *{key}; positional varargs cannot be named")
        return bound_args

    def call(self, name: str, arguments: dict[str, Any]) -> CallResult:
        try:
            if not self.has_tool(name):
                raise KeyError(f"unknown tool {name!r} for {self.env_id}")
            method = getattr(self._instances[self._owner[name]], name)
            return CallResult(value=method(**copy.deepcopy(arguments)))
        except Exception as exc:  # env code is allowed to raise anything
            return CallResult(error_type=type(exc).__name__, error_message=str(exc))

    def state(self) -> JSONValue:
        return {name: canonicalize(inst) for name, inst in self._instances.items()}

    def observation(self, result: CallResult) -> str:
        if result.raised:
            return f"Error during execution: {result.error_message}"
        # bfcl's executor: dict -> json.dumps (fallback str), anything else (a str stays itself) -> str
        if type(result.value) is dict:
            with suppress(Exception):
                return json.dumps(result.value)
        return str(result.value)

    def outcome(self, name: str, result: CallResult) -> str:
        return default_outcome(name, result.raised, result.value)

    def source_of(self, name: str) -> str:
        return tool_source(self._owner[name], name)

    def class_source(self) -> str:
        return "\n\n".join(class_source(c) for c in self.classes)


@cache
def class_source(name: str) -> str:
    return inspect.getsource(env_class(name))


@cache
def tool_source(cls_name: str, tool: str) -> str:
    return inspect.getsource(getattr(env_class(cls_name), tool))
