"""A seeded, schema-driven exploration policy (runs inside the sandbox child, next to the env).

Each step it picks a tool (weighted — the parent steers the weights toward strata still short of
their quota) and fills the arguments from the tool's JSON schema with values drawn from the live
state: existing ids and names by field name, sizes of batch arguments from 1 to ``max_batch``.
With probability ``mutate_rate`` one argument is mutated (an id that does not exist, a negative or
huge number, an empty string) to provoke the environment's rule failures.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from pipeline.collect.trajectory import Action


@dataclass(frozen=True)
class PolicySettings:
    seed: int = 0
    episode_length: int = 10
    mutate_rate: float = 0.2
    optional_rate: float = 0.5
    max_batch: int = 6
    tool_weights: dict[str, float] = field(default_factory=dict)


class StateIndex:
    """Values found in a canonical state, by the field name (or table name) they appear under."""

    def __init__(self, state: Any, cap: int = 64) -> None:
        self.values: dict[str, list[Any]] = {}
        self.tables: dict[str, list[str]] = {}
        self.cap = cap
        self._walk(state, None, 0)

    def _add(self, key: str, value: Any) -> None:
        bucket = self.values.setdefault(key, [])
        if len(bucket) < self.cap and value not in bucket:
            bucket.append(value)

    def _walk(self, node: Any, key: str | None, depth: int) -> None:
        if depth > 8:
            return
        if isinstance(node, dict):
            if key and node and all(isinstance(v, dict) for v in node.values()):
                self.tables[key] = list(node)[: self.cap]
            for k, v in node.items():
                self._walk(v, k, depth + 1)
        elif isinstance(node, list):
            for v in node[: self.cap]:
                if isinstance(v, (str, int, float)) and not isinstance(v, bool) and key:
                    self._add(key, v)
                    self._add(_singular(key), v)
                else:
                    self._walk(v, key, depth + 1)
        elif key is not None and isinstance(node, (str, int, float)) and not isinstance(node, bool):
            self._add(key, node)

    def candidates(self, name: str) -> list[Any]:
        """Known values for a parameter called ``name``: values seen under that field, else the
        keys of the entity table it refers to (``from_account`` -> ``accounts``, ``sku`` -> keys
        like ``SKU-0001``)."""
        single = _singular(name)
        for key in (name, single):
            if self.values.get(key):
                return self.values[key]
        stem = single[:-3] if single.endswith("_id") else single
        for table, keys in self.tables.items():
            table_single = _singular(table)
            if table_single and (table_single in stem or stem.endswith(table_single) or stem in table_single):
                return keys
        for table, keys in self.tables.items():
            if keys and stem and stem.lower() in str(keys[0]).lower():
                return keys
        if single.endswith("_id") or single == "id":
            return [k for keys in self.tables.values() for k in keys][: self.cap]
        return []


def _singular(name: str) -> str:
    if name.endswith("_ids"):
        return name[:-1]
    if name.endswith("ies"):
        return name[:-3] + "y"
    if name.endswith("s") and not name.endswith("ss"):
        return name[:-1]
    return name


class ExplorationPolicy:
    def __init__(self, tools: list[dict[str, Any]], settings: PolicySettings) -> None:
        self.tools = [t["function"] for t in tools]
        self.settings = settings
        self.rng = random.Random(settings.seed)

    def next_action(self, state: Any, index: int) -> Action | None:
        if index >= self.settings.episode_length or not self.tools:
            return None
        weights = [max(self.settings.tool_weights.get(t["name"], 1.0), 0.0) for t in self.tools]
        if not any(weights):
            weights = [1.0] * len(self.tools)
        tool = self.rng.choices(self.tools, weights=weights)[0]
        return Action(tool["name"], self.arguments(tool, StateIndex(state)), turn=index)

    def arguments(self, tool: dict[str, Any], index: StateIndex) -> dict[str, Any]:
        params = tool.get("parameters") or {}
        props: dict[str, Any] = params.get("properties") or {}
        required = set(params.get("required") or [])
        args = {
            name: self.value(name, schema or {}, index)
            for name, schema in props.items()
            if name in required or self.rng.random() < self.settings.optional_rate
        }
        if args and self.rng.random() < self.settings.mutate_rate:
            name = self.rng.choice(sorted(args))
            args[name] = self.mutate(args[name])
        return args

    def value(self, name: str, schema: dict[str, Any], index: StateIndex) -> Any:
        rng = self.rng
        if "enum" in schema and schema["enum"]:
            return rng.choice(schema["enum"])
        kind = schema.get("type")
        known = index.candidates(name)
        if kind == "array":
            item_schema = schema.get("items") or {}
            pool = known or index.candidates(_singular(name)) or [k for ks in index.tables.values() for k in ks]
            size = rng.randint(1, self.settings.max_batch)
            if item_schema.get("type") == "object":
                return [self.object_value(item_schema, index) for _ in range(size)]
            if pool:
                return rng.sample(pool, min(size, len(pool)))
            return [self.value(_singular(name), item_schema, index) for _ in range(size)]
        if kind == "object":
            return self.object_value(schema, index)
        if kind == "boolean":
            return rng.random() < 0.5
        typed = [v for v in known if _fits(v, kind)]
        if typed:
            return rng.choice(typed)
        if kind == "integer":
            return rng.randint(1, 5)
        if kind == "number":
            return round(rng.uniform(1, 100), 2)
        ids = [k for keys in index.tables.values() for k in keys]
        pool = [v for vs in index.values.values() for v in vs if isinstance(v, str)]
        if ids and (not pool or rng.random() < 0.5):
            return rng.choice(ids)
        return rng.choice(pool) if pool else f"{name}-{rng.randint(1, 99)}"

    def object_value(self, schema: dict[str, Any], index: StateIndex) -> dict[str, Any]:
        props = schema.get("properties") or {}
        return {k: self.value(k, v or {}, index) for k, v in props.items()}

    def mutate(self, value: Any) -> Any:
        rng = self.rng
        if isinstance(value, bool):
            return not value
        if isinstance(value, int):
            return rng.choice([-value - 1, 0, value * 1000 + 999])
        if isinstance(value, float):
            return rng.choice([-value, 0.0, value * 1000])
        if isinstance(value, str):
            return rng.choice(["", f"{value}-missing", "UNKNOWN-404"])
        if isinstance(value, list):
            return [] if rng.random() < 0.5 else value + ["UNKNOWN-404"]
        return value


def _fits(value: Any, kind: str | None) -> bool:
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "string" or kind is None:
        return isinstance(value, str)
    return True
