"""A seeded, schema-driven exploration policy (runs inside the sandbox child, next to the env).

Each step it picks a tool (weighted: the parent steers the weights toward strata short of their quota) and fills
its arguments from the tool's JSON schema (:mod:`pipeline.execution.schema`) with values drawn from the live state,
so a call never gets a non-conformant argument by accident. With probability ``mutate_rate`` one argument is
mutated, keeping its type, to provoke rule failures; the action records which (``Action.mutated_arg``).
"""

from __future__ import annotations

import copy
import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pipeline.core.fields import setting
from pipeline.core.trajectory import Action
from pipeline.execution.relations import (
    Hints,
    MappingMemo,
    Records,
    bind,
    is_mapping,
    refusal_hints,
    singular,
    unset_id,
)
from pipeline.execution.schema import conforms, format_string, is_type, numeric, pattern_string, resolved


@dataclass(frozen=True)
class PolicySettings:
    """One episode's policy. Exploration (``ExploreSettings``) passes its run's values on."""

    seed: int = setting(0, "Seed of the episode's choices.")
    episode_length: int = setting(12, "Calls per episode (one episode per scenario visit).")
    mutate_rate: float = setting(0.15, "Chance to mutate an argument to provoke rule failures.")
    optional_rate: float = setting(0.5, "Chance to fill an optional argument.")
    max_batch: int = setting(6, "Largest list argument the policy builds (drives |Δ|).")
    tool_weights: dict[str, float] = setting(factory=dict, description="Relative weight of each tool (default 1).")
    relational: bool = setting(
        True,
        "Draw related arguments, mutate success seeds and heed refusals (the fields below); false: the plain "
        "policy, each argument drawn on its own from the state's values, as the builtin pack is explored "
        "(its source sets it: docs/environments.md).",
    )
    relate_rate: float = setting(
        0.6,
        "Chance that a call's arguments are drawn from related records of the state and earlier answers "
        "(pipeline/execution/relations.py) rather than one by one.",
    )
    seed_rate: float = setting(0.35, "Chance that a call of a tool with seeds mutates one of them.")
    seeds: dict[str, list[dict[str, Any]]] = setting(
        factory=dict,
        description="Per tool, arguments of calls that reached something new (exploration passes them on).",
    )
    refusals: dict[str, list[dict[str, Any]]] = setting(
        factory=dict,
        description="Per tool, recent refusals ({text, args}): what they name steers the next draws.",
    )


class StateIndex:
    """Values found in a canonical state, by the field name (or table name) they appear under."""

    def __init__(
        self, state: Any, cap: int = 64, relational: bool = True, mapping: Callable[[dict], bool] = is_mapping
    ) -> None:
        self.values: dict[str, list[Any]] = {}
        self.tables: dict[str, list[str]] = {}
        #: records (dicts) by the field name they are held under (an object argument of that name may be one)
        self.objects: dict[str, list[dict[str, Any]]] = {}
        self.cap = cap
        #: a table is any dict keyed by ids (:func:`is_mapping`); false: only a dict of records (the plain policy)
        self.relational = relational
        self._is_mapping = mapping  # is_mapping, or a MappingMemo of the episode's states
        self._walk(state, None, 0)

    def _add(self, key: str, value: Any) -> None:
        bucket = self.values.setdefault(key, [])
        if len(bucket) < self.cap and value not in bucket:
            bucket.append(value)

    def _walk(self, node: Any, key: str | None, depth: int) -> None:
        if depth > 8:
            return
        if isinstance(node, dict):
            if key and (  # keyed by ids, whatever its values (``{"A1": None, ...}``)
                self._is_mapping(node) if self.relational else node and all(isinstance(v, dict) for v in node.values())
            ):
                self.tables[key] = list(node)[: self.cap]
            if key and self.relational:
                bucket = self.objects.setdefault(key, [])
                if len(bucket) < self.cap:
                    bucket.append(node)
            for k, v in node.items():
                self._walk(v, k, depth + 1)
        elif isinstance(node, list):
            for v in node[: self.cap]:
                if isinstance(v, (str, int, float)) and not isinstance(v, bool) and key:
                    self._add(key, v)
                    self._add(singular(key), v)
                else:
                    self._walk(v, key, depth + 1)
        elif key is not None and isinstance(node, (str, int, float)) and not isinstance(node, bool):
            if not unset_id(key, node):
                self._add(key, node)

    def candidates(self, name: str) -> list[Any]:
        """Known values for a parameter called ``name``: values seen under that field, else the keys of the table it
        refers to (``from_account`` -> ``accounts``), else, for a name or key (``supply_names``), the values held
        under its base (``supply``) or the keys of the mapping named for it (``supplies``)."""
        single = singular(name)
        for key in (name, single):
            if self.values.get(key):
                return self.values[key]
        stem = single[:-3] if single.endswith("_id") else single
        for table, keys in self.tables.items():
            table_single = singular(table)
            if table_single and (table_single in stem or stem.endswith(table_single) or stem in table_single):
                return keys
        for keys in self.tables.values():
            if keys and stem and stem.lower() in str(keys[0]).lower():
                return keys
        base = single.removesuffix("_name").removesuffix("_key")
        if base != single:  # ``supply_names``: the values held as ``supply``, or the keys of ``supplies``
            if self.values.get(base):
                return self.values[base]
            for table, nodes in self.objects.items():
                if singular(table) == base and nodes and nodes[0]:
                    return list(nodes[0])[: self.cap]
        if single.endswith("_id") or single == "id":
            return [k for keys in self.tables.values() for k in keys][: self.cap]
        return []


#: answers of earlier calls an episode keeps as candidates (its bundles), the latest first
RETURNED = 12
#: chance that an argument a refusal listed the valid values of takes one of them (the relational policy)
LISTED_RATE = 0.6
#: chance that an object argument is a record the state holds under its name, when one fits its schema
RECORD_RATE = 0.5


def _resolved_tool(function: dict[str, Any]) -> dict[str, Any]:
    """A tool's function with its parameters' references resolved (:func:`schema.resolved`); itself when none."""
    params = function.get("parameters")
    plain = resolved(params) if isinstance(params, dict) else params
    return function if plain is params else {**function, "parameters": plain}


class ExplorationPolicy:
    def __init__(self, tools: list[dict[str, Any]], settings: PolicySettings) -> None:
        self.tools = [_resolved_tool(t["function"]) for t in tools]
        self.settings = settings
        self.rng = random.Random(settings.seed)
        self._indexed: tuple[Any, StateIndex, Records | None] | None = None
        self._mapping = MappingMemo()  # the episode's states share unchanged subtrees: each dict judged once
        self._hints: dict[str, Hints] = {}
        #: what earlier calls of the episode answered (bundles), and the values they answered or used
        self.returned: list[Records] = []
        self.focus: list[Any] = []

    def _index(self, state: Any, key: Any) -> tuple[StateIndex, Records | None]:
        """The state's indexes, rebuilt only when the state changed (``key``: its canonical text)."""
        if self._indexed is None or key is None or self._indexed[0] is not key:
            relational = self.settings.relational
            memo = self._mapping
            indexes = (
                StateIndex(state, relational=relational, mapping=memo),
                Records(state, memo) if relational else None,
            )
            self._indexed = (key, *indexes)
            self._hints.clear()
        return self._indexed[1], self._indexed[2]

    def next_action(self, state: Any, index: int, key: Any = None) -> Action | None:
        if index >= self.settings.episode_length or not self.tools:
            return None
        weights = [max(self.settings.tool_weights.get(t["name"], 1.0), 0.0) for t in self.tools]
        if not any(weights):
            weights = [1.0] * len(self.tools)
        tool = self.rng.choices(self.tools, weights=weights)[0]
        state_index, records = self._index(state, key)
        if records is None:  # the plain policy: no seed, no related draw (main's stream of draws)
            args, mutated = self.arguments_and_mutation(tool, state_index)
            return Action(tool["name"], args, turn=index, mutated_arg=mutated)
        seeds = self.settings.seeds.get(tool["name"])
        if seeds and self.rng.random() < self.settings.seed_rate:
            args = self.from_seed(tool, seeds[self.rng.randrange(len(seeds))], state_index, records)
            return Action(tool["name"], self.listed(tool, args, records), turn=index, mutated_arg=None)
        args, mutated = self.arguments_and_mutation(tool, state_index, records)
        return Action(tool["name"], args, turn=index, mutated_arg=mutated)

    def observe(self, arguments: Mapping[str, Any], value: Any) -> None:
        """What a call of the episode used and answered: later calls draw from the answers and prefer records that
        hold these values (the relational policy only)."""
        if not self.settings.relational:
            return
        answered = Records(value)
        self.returned = [answered, *self.returned[: RETURNED - 1]]
        fresh = [v for bucket in answered.records[0].fields.values() for v in bucket if isinstance(v, str)][:16]
        self.focus = list(dict.fromkeys([*fresh, *_strings(arguments.values()), *self.focus]))[:24]

    def hints(self, tool: str, records: Records) -> Hints:
        if tool not in self._hints:
            self._hints[tool] = refusal_hints(self.settings.refusals.get(tool, ()), records)
        hints = self._hints[tool]
        return Hints(hints.avoid, hints.prefer, self.focus, hints.suggest)

    def related(self, tool: dict[str, Any], names: list[str], records: Records, grow: int = 0) -> dict[str, Any]:
        """Values for ``names`` drawn from related records and earlier answers (:func:`relations.bind`), lists at
        least ``grow`` long when the pool allows."""
        props: dict[str, Any] = (tool.get("parameters") or {}).get("properties") or {}
        schemas = {n: self._concrete(props.get(n)) for n in names}
        names = [n for n in names if schemas[n] is not None and "enum" not in schemas[n] and "const" not in schemas[n]]
        sizes = {}
        for n in names:
            if schemas[n].get("type") == "array":
                lo, hi = self._bounds(schemas[n])
                sizes[n] = (max(lo, min(grow, hi)), hi)
        item = {n: (schemas[n].get("items") or {}) if n in sizes else schemas[n] for n in names}

        def fits(n: str, v: Any) -> bool:
            return _fits(v, item[n].get("type") if isinstance(item[n], dict) else None) and conforms(v, item[n])

        return bind(records, names, fits, self.rng, sizes, self.hints(tool["name"], records), self.returned)

    def _concrete(self, schema: Any) -> dict[str, Any] | None:
        """A schema of one type for relational drawing (a union's first concrete variant), or None."""
        if not isinstance(schema, dict):
            return {}
        kind = schema.get("type")
        if isinstance(kind, list):
            kinds = [k for k in kind if k != "null"]
            return {**schema, "type": kinds[0]} if kinds else None
        for key in ("anyOf", "oneOf"):
            if isinstance(schema.get(key), list):
                subs = [s for s in schema[key] if isinstance(s, dict) and s.get("type") != "null"]
                return self._concrete(subs[0]) if subs else None
        return schema if kind in (None, "string", "integer", "number", "array") else None

    def _bounds(self, schema: dict[str, Any]) -> tuple[int, int]:
        lo = schema.get("minItems", 1) if isinstance(schema.get("minItems"), int) else 1
        hi = schema.get("maxItems") if isinstance(schema.get("maxItems"), int) else self.settings.max_batch
        return max(0, lo), max(lo, min(hi, max(lo, self.settings.max_batch)))

    def from_seed(
        self, tool: dict[str, Any], seed: Mapping[str, Any], index: StateIndex, records: Records
    ) -> dict[str, Any]:
        """A seed's arguments changed toward more: its lists one item longer, or one argument drawn from another
        record joined on the others."""
        args = copy.deepcopy(dict(seed))
        if not args:
            return args
        props = (tool.get("parameters") or {}).get("properties") or {}
        for n in [n for n in sorted(args) if isinstance(props.get(n), dict) and not conforms(args[n], props[n])]:
            args[n] = self.value(n, props[n], index)  # a seed's argument that a mutation broke: drawn anew
        lists = [n for n, v in args.items() if isinstance(v, list)]
        if lists and self.rng.random() < 0.5:
            grow = max(len(args[n]) for n in lists) + 1
            keep = {n: v for n, v in args.items() if n not in lists and id_value(v)}
            self.focus = list(dict.fromkeys([*_strings(keep.values()), *self.focus]))[:24]
            drawn = self.related(tool, sorted(args), records, grow=grow)
            drawn.update({n: v for n, v in keep.items() if n in drawn})
            return {n: drawn.get(n, args[n]) for n in args}
        name = sorted(args)[self.rng.randrange(len(args))]
        others = {n: v for n, v in args.items() if n != name}
        saved = self.focus
        self.focus = list(dict.fromkeys([*_strings(others.values()), *saved]))[:24]
        drawn = self.related(tool, [name], records)
        self.focus = saved
        if name in drawn and drawn[name] != args[name]:
            args[name] = drawn[name]
        else:
            schema = props.get(name) if isinstance(props.get(name), dict) else {}
            args[name] = self.value(name, schema, index)
        return args

    def arguments_and_mutation(
        self, tool: dict[str, Any], index: StateIndex, records: Records | None = None
    ) -> tuple[dict[str, Any], str | None]:
        """Arguments that follow the tool's schema, and the name of the one deliberately mutated (or None). With
        ``records``, a ``relate_rate`` share of calls draws its arguments from related records."""
        params = tool.get("parameters") or {}
        props: dict[str, Any] = params.get("properties") or {}
        required = set(params.get("required") or [])
        if records is None:  # one by one: each optional argument's draw, then its value's draws, in turn
            args = {
                name: self.value(name, schema if isinstance(schema, dict) else {}, index, name in required)
                for name, schema in props.items()
                if name in required or self.rng.random() < self.settings.optional_rate
            }
            return self._mutated(args, props)
        chosen = [name for name in props if name in required or self.rng.random() < self.settings.optional_rate]
        drawn: dict[str, Any] = {}
        if chosen and self.rng.random() < self.settings.relate_rate:
            drawn = self.related(tool, chosen, records)
        args = {
            name: drawn[name]
            if name in drawn
            else self.value(name, props[name] if isinstance(props[name], dict) else {}, index, name in required)
            for name in chosen
        }
        return self._mutated(self.listed(tool, args, records), props)

    def listed(self, tool: dict[str, Any], args: dict[str, Any], records: Records) -> dict[str, Any]:
        """``args`` with, a ``LISTED_RATE`` share of the time, a value a refusal of the tool listed as valid for an
        argument, when one fits its schema."""
        suggest = self.hints(tool["name"], records).suggest
        props: dict[str, Any] = (tool.get("parameters") or {}).get("properties") or {}
        for name in [n for n in props if n in suggest]:
            if self.rng.random() >= LISTED_RATE:
                continue
            schema = props[name] if isinstance(props[name], dict) else {}
            items = schema.get("items") if schema.get("type") == "array" else None
            pool = [c for v in suggest[name] for c in _readings(v) if conforms(c, items if items else schema)]
            if pool and isinstance(items, dict):
                lo, hi = self._bounds(schema)
                args[name] = self.rng.sample(pool, max(min(lo, len(pool)), 1))
            elif pool:
                args[name] = pool[self.rng.randrange(len(pool))]
        return args

    def _mutated(self, args: dict[str, Any], props: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
        """``args`` with one argument mutated, a ``mutate_rate`` share of the time, and its name."""
        mutated = None
        if args and self.rng.random() < self.settings.mutate_rate:
            mutated = self.rng.choice(sorted(args))
            args[mutated] = self.mutate(args[mutated])
        return args, mutated

    def value(self, name: str, schema: dict[str, Any], index: StateIndex, required: bool = True) -> Any:
        """A value of the schema: a constant, an enum member, a variant of a union (null only for optional
        arguments), an object, an array, or a scalar from the live state."""
        rng = self.rng
        if "const" in schema:
            return schema["const"]
        if isinstance(schema.get("enum"), list) and schema["enum"]:
            return rng.choice(schema["enum"])
        variant = self.variant(schema, required)
        if variant is None:
            return None
        if variant is not schema:
            return self.value(name, variant, index, required)
        kind = schema.get("type")
        known = index.candidates(name)
        if kind == "array":
            return self.array_value(name, schema, index, known)
        if kind == "object":
            return self.object_value(schema, index, name)
        if kind == "boolean":
            return rng.random() < 0.5
        if kind == "null":
            return None
        typed = [v for v in known if _fits(v, kind) and conforms(v, schema)]
        if typed:
            return rng.choice(typed)
        if kind in ("integer", "number"):
            return self.number(schema, integer=kind == "integer")
        if kind == "string":
            drawn = self.string(schema)
            if drawn is not None:
                return drawn
        if kind is None and known:
            return rng.choice(known)  # untyped: a value the state holds under that name
        ids = [k for keys in index.tables.values() for k in keys]
        pool = [v for vs in index.values.values() for v in vs if isinstance(v, str)]
        if _constrained(schema):  # a string of a length or pattern: only the state's values that have it
            ids, pool = [v for v in ids if conforms(v, schema)], [v for v in pool if conforms(v, schema)]
        if ids and (not pool or rng.random() < 0.5):
            return rng.choice(ids)
        return rng.choice(pool) if pool else f"{name}-{rng.randint(1, 99)}"

    def string(self, schema: dict[str, Any]) -> str | None:
        """A string of the schema's ``format`` or ``pattern`` (None: neither, or none drawn)."""
        drawn = format_string(schema.get("format"), self.rng)
        if drawn is None and isinstance(schema.get("pattern"), str):
            drawn = pattern_string(schema["pattern"], self.rng)
        if drawn is None and isinstance(schema.get("minLength"), int) and schema["minLength"] > 0:
            drawn = "x" * schema["minLength"]
        return drawn

    def variant(self, schema: dict[str, Any], required: bool) -> dict[str, Any] | None:
        """The schema itself, one concrete variant of a union, or None (null picked)."""
        kind = schema.get("type")
        options: list[dict[str, Any]] = []
        if isinstance(kind, list):
            options = [{**schema, "type": k} for k in kind if isinstance(k, str)]
        for key in ("anyOf", "oneOf"):
            if isinstance(schema.get(key), list):
                base = {k: v for k, v in schema.items() if k not in ("anyOf", "oneOf")}
                options += [{**base, **sub} for sub in schema[key] if isinstance(sub, dict)]
        if not options:
            return schema
        concrete = [o for o in options if o.get("type") != "null"]
        nullable = len(concrete) < len(options)
        if not concrete or (nullable and not required and self.rng.random() < 0.15):
            return None
        return self.rng.choice(concrete)

    def number(self, schema: dict[str, Any], integer: bool) -> int | float:
        """A number within the schema's bounds (an exclusive bound is stepped over: 1 for an integer, 0.01)."""
        step = 1 if integer else 0.01
        lo, hi = schema.get("minimum"), schema.get("maximum")
        if numeric(schema.get("exclusiveMinimum")):
            lo = schema["exclusiveMinimum"] + step if not numeric(lo) else max(lo, schema["exclusiveMinimum"] + step)
        if numeric(schema.get("exclusiveMaximum")):
            hi = schema["exclusiveMaximum"] - step if not numeric(hi) else min(hi, schema["exclusiveMaximum"] - step)
        lo = 1 if not isinstance(lo, (int, float)) else lo
        hi = max(lo, lo + (4 if integer else 99)) if not isinstance(hi, (int, float)) else max(lo, hi)
        if integer:
            return self.rng.randint(
                int(math.ceil(lo)), int(math.floor(hi)) if math.floor(hi) >= math.ceil(lo) else int(math.ceil(lo))
            )
        return round(self.rng.uniform(lo, hi), 2)

    def array_value(self, name: str, schema: dict[str, Any], index: StateIndex, known: list[Any]) -> list[Any]:
        rng = self.rng
        item_schema = schema.get("items") if isinstance(schema.get("items"), dict) else {}
        lo = schema.get("minItems", 1) if isinstance(schema.get("minItems"), int) else 1
        hi = schema["maxItems"] if isinstance(schema.get("maxItems"), int) else self.settings.max_batch
        size = rng.randint(min(lo, hi), max(lo, min(hi, max(lo, self.settings.max_batch))))
        item_kind = item_schema.get("type")
        plain = (
            isinstance(item_kind, str) and item_kind in ("string", "integer", "number") and "enum" not in item_schema
        )
        if plain or not item_schema:
            pool = known or index.candidates(singular(name)) or [k for ks in index.tables.values() for k in ks]
            pool = [v for v in pool if _fits(v, item_kind) and conforms(v, item_schema)]
            if pool:
                return rng.sample(pool, min(size, len(pool)))
        items = [self.value(singular(name), item_schema, index) for _ in range(size)]
        if schema.get("uniqueItems") is True:  # drawn again, the same items count once
            items = [v for i, v in enumerate(items) if v not in items[:i]]
        return items

    def object_value(self, schema: dict[str, Any], index: StateIndex, name: str = "") -> dict[str, Any]:
        """A record the state holds under ``name`` that fits the schema (a ``RECORD_RATE`` share), else an object
        drawn property by property."""
        fitting = [o for o in index.objects.get(name, ()) if conforms(o, schema)]
        if fitting and self.rng.random() < RECORD_RATE:
            return copy.deepcopy(fitting[self.rng.randrange(len(fitting))])
        props = schema.get("properties") or {}
        required = set(schema.get("required") or props)
        return {
            k: self.value(k, v if isinstance(v, dict) else {}, index, k in required)
            for k, v in props.items()
            if k in required or self.rng.random() < self.settings.optional_rate
        }

    def mutate(self, value: Any) -> Any:
        """A value of the same type that the environment should refuse (an id that does not exist, a negative,
        zero or huge number, an empty string, an empty or padded list)."""
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
            if not value or rng.random() < 0.5:
                return []
            return value + [self.mutate(value[0])]  # an extra item of the same type, meant not to exist
        if isinstance(value, dict) and value:
            key = rng.choice(sorted(value))
            return {**value, key: self.mutate(value[key])}
        return value


def _readings(value: Any) -> list[Any]:
    """A listed value as each type it may be meant as (``"3"``: the string, the integer)."""
    out = [value]
    if isinstance(value, str) and value.lstrip("-").isdigit():
        out.append(int(value))
    return out


def id_value(value: Any) -> bool:
    """A scalar a record may hold (what a seed's kept arguments are matched on)."""
    return isinstance(value, (str, int)) and not isinstance(value, bool)


def _strings(values: Any) -> list[str]:
    return [v for a in values for v in (a if isinstance(a, list) else [a]) if isinstance(v, str)]


def _constrained(schema: dict[str, Any]) -> bool:
    """Whether a string schema says more than its type (a pattern, a format, a length)."""
    return any(k in schema for k in ("pattern", "format", "minLength", "maxLength"))


def _fits(value: Any, kind: Any) -> bool:
    """:func:`schema.is_type`, an untyped value a string."""
    if isinstance(kind, list):
        return any(_fits(value, k) for k in kind)
    return isinstance(value, str) if kind is None else is_type(value, kind)
