"""Adapter for environments in EnvScaler's released format (docs/environments.md, "envscaler" and "The corpus as
published on the Hugging Face Hub"; docs/definitions.md for the state and observation rules).

Env items (``env_id -> item`` with the class source in ``env_class_code``, run with ``exec`` only ever inside a
sandbox child) and scenario items are read from the dict format (``191_env_metadata.json``) and the Hub release
(a list of records with JSON-string fields), as JSON, JSON lines or Parquet, with identical results; every
per-record error names the record and is bounded in size. Missing tool schemas are derived from the methods'
signatures and docstrings. An instance is built as EnvScaler does (``cls(init_config)``, else ``cls()``, then every
config key set as an attribute); its state is the instance's own attributes (``__getstate__``, ``__dict__``,
``__slots__``: :func:`pipeline.core.canonical.object_state`) minus dunder keys, an observation ``str(return value)``
without memory addresses.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import functools
import json
import pickle
import re
import sys
import textwrap
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.core.canonical import JSONValue, canonicalize, object_state, plain_pickle, without_addresses
from pipeline.core.environment import CallResult, EnvSpec
from pipeline.core.issues import TaskIssue
from pipeline.core.outcome import RULE_OPTION, default_outcome
from pipeline.core.untrusted import SAFE_TOOL, id_problem, shown
from pipeline.envs import blobs, records

SOURCE = "envscaler"
#: the env item's key (and spec option) naming what builds an instance from ``init_config``: a class method or static
#: method of the class, or a function of ``env_class_code``, called with the config (no attribute is set after it)
CONSTRUCTOR = "env_constructor"


@dataclass(frozen=True)
class EnvItem:
    env_id: str  # as given in the corpus
    class_name: str
    class_code: str
    tools: list[dict[str, Any]]
    tools_derived: bool = False
    origin: str = ""
    prefix: str = SOURCE  # env ids are namespaced: "<prefix>/<env_id>"
    license: str = ""
    problems: tuple[str, ...] = ()  # tool schemas dropped because they do not fit their method
    outcome_rule: str | None = None  # its corpus's declared outcome rule (OutcomeRule.id); None: the default rule
    constructor: str | None = None  # ``env_constructor``: what builds an instance from ``init_config`` (CONSTRUCTOR)
    adapter: str = SOURCE  # the adapter of its specs (``EnvSpec.source``): this format's, or one that extends it

    @property
    def qualified_id(self) -> str:
        return f"{self.prefix}/{self.env_id}"

    @property
    def tool_names(self) -> list[str]:
        return [t["function"]["name"] for t in self.tools]

    def spec(self, init_config: dict[str, Any]) -> EnvSpec:
        """Its environment spec; a declared outcome rule rides in the options (``RULE_OPTION``), so it is
        part of every trajectory's fingerprint and reaches the labels (docs/definitions.md §4.3)."""
        options = {
            "class_name": self.class_name,
            "code_ref": blobs.put(self.class_code),
            "tools_ref": blobs.put(json.dumps(self.tools, sort_keys=True)),
        }
        if self.outcome_rule is not None:
            options[RULE_OPTION] = self.outcome_rule
        if self.constructor is not None:
            options[CONSTRUCTOR] = self.constructor
        return EnvSpec(source=self.adapter, env_id=self.qualified_id, init_config=init_config, options=options)


@dataclass(frozen=True)
class Scenario:
    task_id: str
    env_id: str
    init_config: dict[str, Any]
    task: str = ""
    checklist: Any = None
    origin: str = ""
    #: reference (gold) calls the scenario carries (:data:`REFERENCE_KEYS`): (tool, arguments) in order
    reference: tuple[tuple[str, dict[str, Any]], ...] = ()


#: the keys of a scenario item whose list of calls is replayed as a reference trajectory before exploration, the
#: first one present: each call ``{"name", "arguments"}`` (``kwargs`` or ``args`` for ``arguments``, as
#: tau-bench writes them; arguments may be a JSON text), OpenAI's ``{"function": {"name", "arguments"}}``, or a
#: call string ``tool(a=1, b="x")`` with keyword arguments
REFERENCE_KEYS = ("reference_actions", "gold_actions", "actions")


def _reference_call(call: Any) -> tuple[str, dict[str, Any]]:
    """One reference call as (tool, arguments); ValueError saying why it is not one."""
    if isinstance(call, str):
        node = ast.parse(call.strip(), mode="eval").body
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name) or node.args:
            raise ValueError(f"not a call with keyword arguments: {_preview(call)}")
        return node.func.id, {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg}
    if not isinstance(call, dict):
        raise ValueError(f"a call is an object or a call string, not {_preview(call)}")
    if isinstance(call.get("function"), dict):
        call = call["function"]
    name = call.get("name")
    args = next((call[k] for k in ("arguments", "kwargs", "args") if k in call), {})
    if isinstance(args, str):
        args = json.loads(args or "{}")
    if not isinstance(name, str) or not name or not isinstance(args, dict):
        raise ValueError(f"a call needs a tool name and an arguments object: {_preview(call)}")
    return name, args


def reference_actions(obj: dict[str, Any]) -> tuple[tuple[tuple[str, dict[str, Any]], ...], str | None]:
    """The reference calls of a scenario item (:data:`REFERENCE_KEYS`), and why they cannot be read (None: they
    can, or there are none)."""
    key = next((k for k in REFERENCE_KEYS if obj.get(k) is not None), None)
    if key is None:
        return (), None
    calls, err = _json_field(obj, key, list)
    if err:
        return (), err
    try:
        return tuple(_reference_call(c) for c in calls), None
    except (ValueError, SyntaxError, RecursionError) as exc:
        return (), f"{key!r}: {str(exc)[: records.MAX_MESSAGE]}"


# -- reading the corpus --------------------------------------------------------------------------


def _preview(value: Any) -> str:
    return records.clip(repr(value), 60)


def _json_field(raw: dict[str, Any], key: str, expected: type | tuple[type, ...]) -> tuple[Any, str | None]:
    """A field that the Hub release stores as a JSON string (``tools``, ``env_func_details``,
    ``init_config``): decoded when it is a string; (value, error)."""
    value = raw.get(key)
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            return None, f"'{key}' is a string but not JSON ({exc.msg} at character {exc.pos}): {_preview(raw[key])}"
    if value is None or isinstance(value, expected):
        return value, None
    names = " or ".join(t.__name__ for t in (expected if isinstance(expected, tuple) else (expected,)))
    return (
        None,
        f"'{key}' is a {type(value).__name__}, expected {names} (a JSON string of one is accepted): {_preview(value)}",
    )


def read_records(path: Path) -> Iterator[tuple[str, Any | None, str | None]]:
    """The raw records of a released file, as the loaders read them: (origin, object, error) for a JSON document
    (list/dict), JSON lines or a Parquet file."""
    path = Path(path)
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        for i, row in enumerate(pq.read_table(path).to_pylist()):
            yield f"{path.name}[{i}]", row, None
        return
    text = records.read_text(path)  # a non-UTF-8 byte is reported with its record (records.undecodable)
    try:
        doc = records.loads(text)  # repeated keys are kept, to be reported
    except (json.JSONDecodeError, RecursionError):
        for lineno, line in enumerate(text.splitlines(), 1):
            if line.strip():
                where = f"{path.name}:{lineno}"
                try:
                    yield where, records.loads(line), None
                except json.JSONDecodeError as exc:
                    yield where, None, f"line is not JSON: {exc.msg} at column {exc.colno}: {_preview(line)}"
                except RecursionError:
                    yield where, None, "line is not usable JSON: nested too deeply"
        return
    if isinstance(doc, list):
        for i, obj in enumerate(doc):
            yield f"{path.name}[{i}]", obj, None
    elif isinstance(doc, dict):
        yield path.name, doc, None
    else:
        yield path.name, None, "expected a JSON object or list"


def load_env_items(path: Path, prefix: str = SOURCE, license: str = "") -> Iterator[EnvItem | TaskIssue]:
    """Read an env-items file: ``{env_id: item}``, or a list of records with ``env_id`` (the Hub release)."""
    for origin, doc, err in read_records(path):
        if err:
            yield TaskIssue(origin, "env", err, origin)
            continue
        if isinstance(doc, dict) and ("env_class_code" in doc or "env_id" in doc):
            entries = [(str(doc.get("env_id") or origin), doc)]
        elif isinstance(doc, dict):
            entries = records.entries(doc)  # a repeated env id is kept, reported by the sources
        else:
            yield TaskIssue(origin, "env", "expected an object of env items", origin)
            continue
        occurrences: dict[str, int] = {}
        for env_id, raw in entries:  # str: a JSON object's keys, or str()'d above
            n = occurrences[env_id] = occurrences.get(env_id, 0) + 1
            where = f"{origin}:{env_id}" + (f" (occurrence {n})" if n > 1 else "")
            bad = records.undecodable(env_id, "the env id") or records.undecodable(raw)
            if bad:
                yield TaskIssue(env_id, "env", bad, where)
                continue
            try:
                result = parse_env_item(env_id, raw, where, prefix, license)
            except Exception as exc:  # a record this loader did not foresee: name it, keep the others
                result = TaskIssue(env_id, "env", f"unreadable env item: {type(exc).__name__}: {exc}", where)
            yield _bounded_issue(result)


def load_scenarios(path: Path) -> Iterator[Scenario | TaskIssue]:
    """Read scenario/task items (JSON list, JSON lines, Parquet, or ``{task_id: item}``); ``init_config``
    may be a JSON string (the Hub release)."""
    for origin, doc, err in read_records(path):
        if err:
            yield TaskIssue(origin, "parse", err, origin)
            continue
        items = doc.items() if isinstance(doc, dict) and "env_id" not in doc else [(None, doc)]
        for key, obj in items:
            where = origin if key is None else f"{origin}:{key}"
            if not isinstance(obj, dict):
                yield TaskIssue(where, "parse", "scenario item is not an object", where)
                continue
            task_id = str(obj.get("task_id") or key or where)
            bad = records.undecodable(obj)
            if bad:
                yield TaskIssue(task_id, "parse", bad, where)
                continue
            if "env_id" not in obj:
                yield TaskIssue(task_id, "parse", "scenario item without 'env_id'", where)
                continue
            cfg, err = _json_field(obj, "init_config", dict)
            if err:
                yield TaskIssue(task_id, "parse", err, where)
                continue
            checklist, _ = _json_field(obj, "checklist_with_func", (list, dict))
            reference, err = reference_actions(obj)
            if err:  # the scenario is explored all the same
                yield TaskIssue(task_id, "parse", f"reference actions not replayed: {err}", where)
            yield Scenario(
                task_id,
                str(obj["env_id"]),
                cfg or {},
                str(obj.get("task", "")),
                checklist if checklist is not None else obj.get("checklist_with_func"),
                where,
                reference,
            )


def parse_env_item(
    env_id: str, raw: Any, origin: str = "", prefix: str = SOURCE, license: str = ""
) -> EnvItem | TaskIssue:
    """Validate one env item without running its code: it must parse, define the class, and its tool schemas must
    fit the methods. Its id must be a safe name (:mod:`pipeline.core.untrusted`: ids reach reports, the card and the
    console); an unsafe one is skipped with its reason (the issue names it escaped)."""
    problem = id_problem(env_id) or id_problem(f"{prefix}/{env_id}", "qualified env id")
    if problem:
        return TaskIssue(shown(env_id), "env", problem, shown(origin, 300))
    if not isinstance(raw, dict):
        return TaskIssue(env_id, "env", "env item is not an object", origin)
    name, code = raw.get("env_class_name"), raw.get("env_class_code")
    if not isinstance(name, str) or not isinstance(code, str):
        return TaskIssue(env_id, "env", "env item needs string 'env_class_name' and 'env_class_code'", origin)
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        return TaskIssue(env_id, "env", f"env_class_code does not compile: line {exc.lineno}: {exc.msg}", origin)
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    if name not in classes:
        why = f"class {name!r} is not defined in env_class_code (classes found: {sorted(classes) or 'none'})"
        return TaskIssue(env_id, "env", why, origin)
    methods = public_methods(classes[name])
    constructor = raw.get(CONSTRUCTOR)
    if constructor is not None and not (isinstance(constructor, str) and constructor.isidentifier()):
        why = f"'{CONSTRUCTOR}' must name a method or function: {_preview(constructor)}"
        return TaskIssue(env_id, "env", why, origin)
    raw_tools, err = _json_field(raw, "tools", list)
    if err:
        return TaskIssue(env_id, "env", err, origin)
    _details, err = _json_field(raw, "env_func_details", (list, dict))
    problems = [err] if err else []  # informative only: the tools come from 'tools' or the methods
    tools = []
    for tool, problem in [_check_tool(t, methods) for t in raw_tools] if raw_tools else map(_derived, methods.values()):
        if problem:
            problems.append(problem)
        else:
            tools.append(tool)
    if not tools:
        why = "no usable tools: " + ("; ".join(problems) or "the class has no public methods")
        return TaskIssue(env_id, "env", records.clip(why, 1000), origin)
    # usable with its valid tools; the bad schemas are reported through ``split_item``
    return EnvItem(
        env_id=env_id,
        class_name=name,
        class_code=code,
        tools=tools,
        tools_derived=not raw_tools,
        origin=origin,
        prefix=prefix,
        license=license,
        problems=tuple(problems),
        constructor=constructor,
    )


def _bounded_issue(result: Any) -> Any:
    limit = records.MAX_MESSAGE * 4  # characters of a per-record error message
    if isinstance(result, TaskIssue) and len(result.reason) > limit:
        return TaskIssue(result.task_id, result.stage, records.clip(result.reason, limit), result.origin)
    return result


def split_item(result: EnvItem | TaskIssue) -> tuple[EnvItem | None, list[TaskIssue]]:
    """``parse_env_item``'s result as (item or None, issues to report)."""
    if isinstance(result, TaskIssue):
        return None, [_bounded_issue(result)]
    return result, [TaskIssue(result.env_id, "tools", records.clip(p), result.origin) for p in result.problems]


# -- schemas from code ---------------------------------------------------------------------------


#: decorators whose method is not a tool: descriptors that are read, not called (``property`` and its
#: ``.setter``/``.getter``/``.deleter``, ``functools.cached_property``, ``abc.abstractproperty``), and the static
#: and class methods the adapter has never offered
NOT_TOOLS = frozenset(
    {"property", "cached_property", "abstractproperty", "setter", "getter", "deleter", "staticmethod", "classmethod"}
)


def _last_name(node: ast.AST) -> str:
    """The last name of ``x`` or ``a.b.x`` ("" for anything else): a decorator's (``cached_property``,
    ``functools.cached_property``, ``x.setter`` say what the method becomes) or an annotation's."""
    return node.id if isinstance(node, ast.Name) else getattr(node, "attr", "")


def public_methods(cls: ast.ClassDef) -> dict[str, ast.FunctionDef]:
    """The class's tools: its public methods as the class body finally binds them. A method decorated as a
    descriptor (:data:`NOT_TOOLS`) or rebound later in the body (``total = property(total)``) is not one."""
    last: dict[str, ast.AST] = {}
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            last[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AugAssign)) or (isinstance(node, ast.AnnAssign) and node.value):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        last[name.id] = node
    return {
        name: node
        for name, node in last.items()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and not name.startswith("_")
        and not any(_last_name(d.func if isinstance(d, ast.Call) else d) in NOT_TOOLS for d in node.decorator_list)
    }


def _params(fn: ast.FunctionDef) -> tuple[list[str], list[str], bool]:
    args = fn.args
    positional = [a.arg for a in args.posonlyargs + args.args][1:]  # drop self
    names = positional + [a.arg for a in args.kwonlyargs]
    required = positional[: len(positional) - len(args.defaults)]
    required += [a.arg for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is None]
    return names, required, args.kwarg is not None


#: the JSON Schema type of an annotation's (last) name
_JSON_TYPES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}
_JSON_TYPES |= dict.fromkeys(("list", "List", "tuple", "Tuple", "set", "Set", "Sequence"), "array")
_JSON_TYPES |= dict.fromkeys(("dict", "Dict", "Mapping"), "object")


def _annotation_schema(node: ast.AST | None) -> dict[str, Any]:
    if node is None:
        return {}
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            node = ast.parse(node.value, mode="eval").body
        except SyntaxError:
            return {}
    if _last_name(node) in _JSON_TYPES:
        return {"type": _JSON_TYPES[_last_name(node)]}
    if isinstance(node, ast.Subscript):
        base = _last_name(node.value)
        if base == "Optional":
            return _annotation_schema(node.slice)
        if base in _JSON_TYPES:
            schema: dict[str, Any] = {"type": _JSON_TYPES[base]}
            if schema["type"] == "array":
                inner = node.slice.elts[0] if isinstance(node.slice, ast.Tuple) and node.slice.elts else node.slice
                item = _annotation_schema(inner)
                if item:
                    schema["items"] = item
            return schema
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):  # X | None
        left = _annotation_schema(node.left)
        return left or _annotation_schema(node.right)
    return {}


_ARG_LINE = re.compile(r"^\s*(\w+)\s*(?:\(([^)]*)\))?\s*:\s*(.*)$")


def _doc_sections(doc: str) -> tuple[str, dict[str, str]]:
    """(summary, {param: description}) from a Google-style docstring."""
    summary, params, section = [], {}, None
    current = None
    for line in textwrap.dedent(doc or "").strip().splitlines():
        stripped = line.strip()
        if stripped.rstrip(":") in ("Args", "Arguments", "Parameters", "Returns", "Raises", "Constraints", "Return"):
            section = stripped.rstrip(":")
            current = None
            continue
        if section is None and stripped:
            summary.append(stripped)
        elif section in ("Args", "Arguments", "Parameters"):
            m = _ARG_LINE.match(line)
            if m and (not line.startswith(" " * 8) or current is None):
                current = m.group(1)
                params[current] = m.group(3).strip()
            elif current and stripped:
                params[current] += " " + stripped
    return " ".join(summary), params


_CHOICES = re.compile(r"\b(?:one of|either):?\s+([\w\s,'\"`]+?)(?:\.|$)", re.IGNORECASE)


def _choices(description: str) -> list[str] | None:
    """``"One of scheduled, delayed or departed."`` -> an enum for the schema; the values may be quoted, as generated
    docstrings often write them (``"either 'asc' or 'desc'."``)."""
    m = _CHOICES.search(description)
    if not m:
        return None
    words = [w.strip().strip("'\"`") for w in re.split(r",|\bor\b", m.group(1)) if w.strip()]
    return words if len(words) >= 2 and all(re.fullmatch(r"[\w-]+", w) for w in words) else None


_NUMBER = r"-?\d+(?:\.\d+)?"
_NUM = f"({_NUMBER})"
#: ``10 to 30``, ``between 5 and 30``, ``(1-60)``, ``(0-10000]`` (interval notation: ``(`` / ``)`` beside ``]`` / ``[``
#: exclude that end; a plain parenthesis around a range includes both)
_RANGE = re.compile(
    rf"(?<![\w.-])([(\[]?)\s*(?:between\s+|from\s+)?{_NUM}\s*(?:-|–|to|and|through)\s*{_NUM}\s*([)\]]?)"
    r"(?![\w%]|[.-]\d)"
)
_LOWER = re.compile(rf"\b(?:at least|no less than|minimum(?: of)?|min\.?)\s+{_NUM}\b|>=\s*{_NUM}\b", re.IGNORECASE)
_UPPER = re.compile(rf"\b(?:at most|no more than|up to|maximum(?: of)?|max\.?)\s+{_NUM}\b|<=\s*{_NUM}\b", re.IGNORECASE)
_ABOVE_ZERO = re.compile(r"\b(?<!non-)(?<!non )positive\b|\bgreater than 0\b|>\s*0\b", re.IGNORECASE)
_NOT_NEGATIVE = re.compile(r"\bnon-?\s?negative\b", re.IGNORECASE)
#: ``1, 2, 3, 5, 8 or 13``: a number's allowed values
_NUMBERS = re.compile(rf"(?<![\w.-]){_NUM}((?:\s*,\s*{_NUMBER})+),?\s+or\s+{_NUM}(?![\w%]|[.-]\d)")


def _number_schema(description: str, kind: str) -> dict[str, Any]:
    """A number's values as its docstring states them: a list (``1, 2, 3, 5, 8 or 13``) as its ``enum``, else its
    bounds (:func:`_bounds`)."""
    if m := _NUMBERS.search(description):
        texts = [m.group(1), *re.split(r"\s*,\s*", m.group(2).strip(" ,")), m.group(3)]
        values = [float(t) for t in texts if t]
        if kind == "number" or all(v.is_integer() for v in values):
            return {"enum": [int(v) if kind == "integer" else v for v in values]}
    return _bounds(description, kind)


def _bounds(description: str, kind: str) -> dict[str, float | int]:
    """A number's schema bounds as its docstring states them: ``10 to 30``, ``between 5 and 30``, ``(1-60)``,
    ``(0-5]``, ``at least 2``, ``at most 100``, ``positive``, ``non-negative``; a range the wrong way round is none."""
    number = int if kind == "integer" else float
    out: dict[str, float | int] = {}
    if m := _RANGE.search(description):
        lo, hi = float(m.group(2)), float(m.group(3))
        if lo < hi and (kind == "number" or (lo.is_integer() and hi.is_integer())):
            interval = m.group(1) + m.group(4) in ("(]", "[)")  # interval notation, not a parenthesis around a range
            out["exclusiveMinimum" if interval and m.group(1) == "(" else "minimum"] = number(lo)
            out["exclusiveMaximum" if interval and m.group(4) == ")" else "maximum"] = number(hi)
            return out
    if m := _LOWER.search(description):
        out["minimum"] = number(float(m.group(1) or m.group(2)))
    elif _NOT_NEGATIVE.search(description):
        out["minimum"] = number(0)
    elif _ABOVE_ZERO.search(description):
        out.update({"minimum": 1} if kind == "integer" else {"exclusiveMinimum": 0.0})
    if m := _UPPER.search(description):
        out["maximum"] = number(float(m.group(1) or m.group(2)))
    lowest = out.get("minimum", out.get("exclusiveMinimum"))
    if lowest is not None and "maximum" in out and out["maximum"] < lowest:
        return {}
    return out


def derive_tool(fn: ast.FunctionDef) -> dict[str, Any]:
    """An OpenAI function schema from a method's signature and docstring."""
    summary, docs = _doc_sections(ast.get_docstring(fn) or "")
    names, required, _ = _params(fn)
    annotations = {a.arg: a.annotation for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs}
    properties = {}
    for name in names:
        prop = _annotation_schema(annotations.get(name)) or {"type": "string"}
        if docs.get(name):
            prop["description"] = docs[name]
            choices = _choices(docs[name])
            if choices and prop.get("type") == "string":
                prop["enum"] = choices
            if prop.get("type") in ("integer", "number"):
                prop.update(_number_schema(docs[name], prop["type"]))
        properties[name] = prop
    return {
        "type": "function",
        "function": {
            "name": fn.name,
            "description": summary or fn.name.replace("_", " "),
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


def _derived(method: ast.FunctionDef) -> tuple[dict[str, Any], str | None]:
    """:func:`derive_tool` of a method whose name is a safe tool name, else why not (as :func:`_check_tool`)."""
    problem = id_problem(method.name, "tool name", SAFE_TOOL)
    return ({}, problem) if problem else (derive_tool(method), None)


def _check_tool(tool: Any, methods: dict[str, ast.FunctionDef]) -> tuple[dict[str, Any], str | None]:
    fn_schema = tool.get("function", tool) if isinstance(tool, dict) else None
    if not isinstance(fn_schema, dict) or not isinstance(fn_schema.get("name"), str):
        return {}, f"tool schema without a name: {_preview(tool)}"
    name = fn_schema["name"]
    problem = id_problem(name, "tool name", SAFE_TOOL)
    if problem:
        return {}, problem
    if name not in methods:
        return {}, f"tool {name!r} has no public method of that name in the class"
    params = fn_schema.get("parameters") or {"type": "object", "properties": {}}
    if not isinstance(params, dict):
        return {}, f"tool {name!r}: 'parameters' is a {type(params).__name__}, expected an object: {_preview(params)}"
    props = params.get("properties") or {}
    if not isinstance(props, dict) or not all(isinstance(p, dict) for p in props.values()):
        return {}, f"tool {name!r}: 'properties' is not an object of parameter schemas: {_preview(props)}"
    listed = params.get("required", [])
    if not isinstance(listed, list) or not all(isinstance(r, str) for r in listed):
        return {}, f"tool {name!r}: 'required' is not a list of names: {_preview(listed)}"
    names, required, has_kwargs = _params(methods[name])
    extra = [p for p in props if p not in names]
    if extra and not has_kwargs:
        return {}, f"tool {name!r} declares parameter(s) {extra} that {name}({', '.join(names)}) does not accept"
    missing = [p for p in required if p not in props]
    if missing:
        return {}, f"tool {name!r} omits required parameter(s) {missing} of {name}({', '.join(names)})"
    return {"type": "function", "function": {**fn_schema, "parameters": {"type": "object", **params}}}, None


@functools.lru_cache(maxsize=256)
def _method_sources(code: str, class_name: str) -> dict[str, str]:
    """Every method's source in the class, from one parse of the class code: its decorators included, preceded by
    the module-level definitions of the code that those decorators name (a decorator that turns a raise into an
    answer changes what the tool answers, so ``code(a_t)`` shows it)."""
    tree = ast.parse(code)
    lines = _LINE.findall(code)
    defined = {
        node.name: node
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name != class_name
    }
    out: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    helpers = [defined[n] for n in _decorator_roots(item) if n in defined]
                    parts = [_node_text(code, lines, h) for h in helpers] + [_node_text(code, lines, item)]
                    out.setdefault(item.name, "\n\n".join(parts))
    return out


def _decorator_roots(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """The first names of a method's decorators (``refusal_as_error``, ``is_tool`` of ``@is_tool(ToolType.READ)``),
    in order, without repeats."""
    names: list[str] = []
    for dec in fn.decorator_list:
        node = dec.func if isinstance(dec, ast.Call) else dec
        while isinstance(node, ast.Attribute):
            node = node.value
        if isinstance(node, ast.Name) and node.id not in names:
            names.append(node.id)
    return names


#: a line as the parser numbers them (end kept; only ``\\r\\n``, ``\\r`` and ``\\n`` end a line, where
#: ``str.splitlines`` also splits at form feeds): ``ast.get_source_segment``'s split, done once per class
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def _node_text(code: str, lines: list[str], node: ast.stmt) -> str:
    """A definition's source, dedented, its decorator lines included (``ast`` starts a decorated def at ``def``):
    ``ast.get_source_segment(code, node, padded=True)`` taken from ``lines`` (:data:`_LINE`)."""
    decorators = getattr(node, "decorator_list", [])
    start = min([node.lineno, *(d.lineno for d in decorators)])
    above = "".join(lines[start - 1 : node.lineno - 1])
    first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
    begin, end = node.col_offset, node.end_col_offset  # set on every node ast.parse makes
    if first == last:
        segment = lines[first].encode()[begin:end].decode()
    else:
        head = lines[first].encode()
        padding = "".join(c if c in "\f\t" else " " for c in head[:begin].decode())
        middle = lines[first + 1 : last]
        segment = padding + head[begin:].decode() + "".join(middle) + lines[last].encode()[:end].decode()
    return textwrap.dedent(above + segment)


def method_source(code: str, class_name: str, method: str) -> str:
    """``code(a_t)``: the method's source, extracted from the class code with ``ast``."""
    try:
        return _method_sources(code, class_name)[method]
    except KeyError:
        raise KeyError(f"{class_name}.{method} not found in the class code") from None


# -- the live environment (sandbox side) -----------------------------------------------------------


def _exec_module(name: str, code: Any) -> dict[str, Any]:
    """Run environment code as the body of a fresh module ``name`` (sandbox child only), kept in ``sys.modules``
    as an imported module is, so class machinery that looks a class's module up (``@dataclass`` string annotations,
    ``typing``, ``pickle``, ``copy``) finds it. A second reset of the same code replaces it."""
    module = types.ModuleType(name)
    sys.modules[name] = module
    exec(code, module.__dict__)  # sandbox child only
    return module.__dict__


def construct(cls: type, namespace: dict[str, Any], init_config: dict[str, Any], constructor: str | None) -> Any:
    """An instance of ``cls`` for ``init_config`` (sandbox child only). With a declared :data:`CONSTRUCTOR`, what it
    returns. Otherwise as EnvScaler does, ``cls(init_config)``, else ``cls()``, then every config key set as an
    attribute, typed: a mapping whose attribute is a pydantic model or a dataclass (the value the class set, else
    its annotation on the class) is validated into that type instead of replacing it with a plain dict."""
    if constructor is not None:
        make = getattr(cls, constructor, None) or namespace.get(constructor)
        if not callable(make):
            raise TypeError(
                f"{CONSTRUCTOR} {constructor!r} is neither a method of {cls.__name__} nor a function of env_class_code"
            )
        return make(init_config)
    try:
        instance = cls(copy.deepcopy(init_config))
    except TypeError:
        instance = cls()
    hints = _annotations(cls, namespace)
    for key, value in init_config.items():
        target = _record_type(getattr(instance, key, None), hints.get(key)) if isinstance(value, dict) else None
        if target is not None:
            try:
                value = target.model_validate(value) if hasattr(target, "model_validate") else target(**value)
            except Exception as exc:
                raise TypeError(
                    f"init_config[{key!r}] does not fit {target.__name__}: {type(exc).__name__}: {str(exc)[:300]}"
                ) from None
        setattr(instance, key, value)
    return instance


def _annotations(cls: type, namespace: dict[str, Any]) -> dict[str, Any]:
    """The class's attribute annotations (its bases' too), resolved in the environment's module where they can be."""
    out: dict[str, Any] = {}
    for base in reversed(cls.__mro__):
        for key, hint in vars(base).get("__annotations__", {}).items():
            if isinstance(hint, str):
                try:
                    hint = eval(hint, namespace)  # sandbox child only: the environment's own annotation
                except Exception:
                    continue
            out[key] = hint
    return out


def _is_record_type(t: Any) -> bool:
    return isinstance(t, type) and (hasattr(t, "model_validate") or dataclasses.is_dataclass(t))


def _record_type(current: Any, hint: Any) -> type | None:
    """The typed record a mapping of the config becomes: the type of the attribute's current value, else the
    annotation (``X`` or ``Optional[X]``); None when neither is a pydantic model or a dataclass."""
    if current is not None and _is_record_type(type(current)):
        return type(current)
    for t in (hint, *typing.get_args(hint)):
        if _is_record_type(t):
            return t
    return None


def module_namespace(code_ref: str, filename: str) -> dict[str, Any]:
    """The namespace of an env item's code run as its module (:func:`_exec_module`; a reset's, or the sandbox
    zygote's once for every child of one environment: :func:`pipeline.execution.worker._prerun`)."""
    return _exec_module(f"envscaler_env_{code_ref}", blobs.compiled(code_ref, filename))


def _copied(init_config: dict[str, Any]) -> dict[str, Any]:
    """``copy.deepcopy(init_config)``: for plain data a pickle round trip (a fifth of deepcopy's time, the same
    sharing: :func:`~pipeline.core.canonical.plain_pickle`), for anything else deepcopy."""
    try:
        return pickle.loads(plain_pickle(init_config))
    except Exception:
        return copy.deepcopy(init_config)


class EnvScalerEnvironment:
    """One EnvScaler class instance behind the environment protocol."""

    def __init__(self, env_id: str, class_name: str, code_ref: str, tools_ref: str, constructor: str | None) -> None:
        self.env_id = env_id
        self.class_name = class_name
        self.code_ref = code_ref
        self.constructor = constructor
        self.tools: list[dict[str, Any]] = json.loads(blobs.get(tools_ref))
        self._names = {t["function"]["name"] for t in self.tools}
        self._instance: Any = None

    def has_tool(self, name: str) -> bool:
        return name in self._names

    def bind_arguments(self, name: str, args: list[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
        if args:
            tool = next(t for t in self.tools if t["function"]["name"] == name)
            names = list(tool["function"]["parameters"].get("properties", {}))
            if len(args) > len(names):
                raise TypeError(f"{name} takes {len(names)} arguments, {len(args)} positional given")
            kwargs = {**dict(zip(names, args)), **kwargs}
        return dict(kwargs)

    def reset(self, init_config: dict[str, Any], **_: Any) -> None:
        namespace = blobs.take_ran(self.code_ref) or module_namespace(self.code_ref, f"<env {self.env_id}>")
        cls = namespace.get(self.class_name)
        if not isinstance(cls, type):
            raise TypeError(f"env_class_code does not define class {self.class_name!r}")
        self._instance = construct(cls, namespace, _copied(init_config), self.constructor)

    def call(self, name: str, arguments: dict[str, Any]) -> CallResult:
        try:
            if name not in self._names:
                raise AttributeError(f"unknown tool {name!r} for {self.env_id}")
            return CallResult(value=getattr(self._instance, name)(**copy.deepcopy(arguments)))
        except Exception as exc:  # its message is a label too: no address in it either
            return CallResult(error_type=type(exc).__name__, error_message=without_addresses(str(exc)))

    def state(self) -> JSONValue:
        return canonicalize(self.state_parts())

    def state_parts(self) -> dict[str, Any]:
        """The instance's attributes, dunders left out (:func:`~pipeline.core.canonical.object_state`), whose
        canonical form :meth:`state` is; for :class:`~pipeline.core.canonical.Snapshots`."""
        own = object_state(self._instance) or {}
        return {k: v for k, v in own.items() if not (k.startswith("__") and k.endswith("__"))}

    def observation(self, result: CallResult) -> str:
        """``str(return value)`` (``Error: <type>: <message>`` when it raised), without the memory addresses of
        default reprs (``<Task object at 0x7f…>`` → ``<Task object>``, docs/definitions.md §4.1)."""
        if result.raised:
            return without_addresses(f"Error: {result.error_type}: {result.error_message}")
        return without_addresses(str(result.value))

    def outcome(self, name: str, result: CallResult) -> str:
        return default_outcome(name, result.raised, result.value)

    def source_of(self, name: str) -> str:
        return method_source(blobs.get(self.code_ref), self.class_name, name)

    def class_source(self) -> str:
        return blobs.get(self.code_ref)


def catalog_rows(items: list[EnvItem]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``environments.parquet`` rows of EnvScaler-format items, and the ``tool_code.parquet`` rows of
    their methods and classes (the catalog's ``source`` column is the item's prefix)."""
    envs, code_rows = [], []
    for item in items:
        codes = [(name, method_source(item.class_code, item.class_name, name)) for name in item.tool_names]
        env, code = catalog_entry(item, codes, item.qualified_id)
        envs.append(env)
        code_rows += code
    return envs, code_rows


def catalog_entry(
    item: EnvItem, codes: list[tuple[str, str]], owner: str
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``item``'s ``environments.parquet`` row (source: its prefix) and its ``tool_code.parquet`` rows, of
    ``owner``: each (tool, code) of ``codes``, then its class's code (``tool`` "")."""
    code_rows = [
        {"code_ref": blobs.ref_of(code), "source": item.prefix, "owner": owner, "tool": tool, "code": code}
        for tool, code in [*codes, ("", item.class_code)]
    ]
    env = {
        "source": item.prefix,
        "env_id": item.qualified_id,
        "env_class": item.class_name,
        "license": item.license,
        "num_tools": len(item.tools),
        "tools": item.tool_names,
        "tools_json": json.dumps(item.tools, sort_keys=True),
        "class_code_ref": blobs.ref_of(item.class_code),
    }
    return env, code_rows
