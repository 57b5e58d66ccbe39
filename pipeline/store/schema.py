"""Arrow schemas of the tables of record (docs/definitions.md §4.4). States are never stored per step:
``trajectories`` holds each initial state once, ``steps`` Δ plus the hashes of ``s_t``/``s'_t``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import pyarrow as pa

from pipeline.core.axes import AXES, Axes
from pipeline.core.canonical import canonical_json
from pipeline.store.glossary import Described


def fields_of(kind: pa.DataType, *names: str, nullable: bool = True) -> list[pa.Field]:
    """Fields of one type (a run of a schema's columns)."""
    return [pa.field(n, kind, nullable=nullable) for n in names]


DELTA_RECORD = pa.struct(
    [
        pa.field("op", pa.string(), nullable=False),
        pa.field("path", pa.list_(pa.string()), nullable=False),
        pa.field("before", pa.string()),  # canonical JSON; null for "add"
        pa.field("after", pa.string()),  # canonical JSON; null for "remove"
    ]
)
DELTA = pa.list_(DELTA_RECORD)

ACTION = pa.struct(
    [
        pa.field("turn", pa.int32()),
        *fields_of(pa.string(), "tool", "arguments_json", "call"),
        pa.field("mutated_arg", pa.string()),  # exploration: the argument deliberately mutated
        pa.field("observed_after_hash", pa.string()),  # exploration: s'_t hash when the policy ran it
    ]
)

TRAJECTORIES = pa.schema(
    [
        *fields_of(pa.string(), "trajectory_id", "source", "env_id", "task_id", nullable=False),
        pa.field("category", pa.string()),
        pa.field("adapter", pa.string()),  # how the environment is built and run (EnvSpec.source); null in older files
        pa.field("strategy", pa.string()),
        pa.field("fingerprint", pa.string(), nullable=False),
        *fields_of(pa.string(), "env_options_json", "init_config_json"),
        *fields_of(pa.string(), "initial_state_json", "initial_state_hash", nullable=False),
        pa.field("num_actions", pa.int32(), nullable=False),
        pa.field("actions", pa.list_(ACTION)),
        pa.field("messages_json", pa.string()),  # agent trajectories: the full OpenAI message history
        pa.field("seed", pa.int64()),  # run seed of the sandbox's seeded randomness
        pa.field("clock_start", pa.string()),  # start of the trajectory's frozen clock (ISO 8601, UTC)
    ]
)

#: roles of the step record's columns (one field list, from which every stage takes its columns)
KEY = "key"  # which step it is: where it comes from and its place in the trajectory
LABEL = "label"  # what executing the call determined; a re-execution must reproduce every one
DETAIL = "detail"  # recorded with the step, never compared

_STEP_FIELDS: list[tuple[pa.Field, str]] = [
    (pa.field("step_id", pa.string(), nullable=False), KEY),
    (pa.field("trajectory_id", pa.string(), nullable=False), KEY),
    (pa.field("source", pa.string(), nullable=False), KEY),
    (pa.field("env_id", pa.string(), nullable=False), KEY),
    (pa.field("task_id", pa.string(), nullable=False), KEY),
    (pa.field("step_index", pa.int32(), nullable=False), KEY),
    (pa.field("turn", pa.int32()), DETAIL),
    (pa.field("tool", pa.string(), nullable=False), LABEL),
    (pa.field("arguments_json", pa.string(), nullable=False), LABEL),
    (pa.field("args_count", pa.int32(), nullable=False), LABEL),
    (pa.field("raw_observation", pa.string(), nullable=False), LABEL),
    (pa.field("observation_json", pa.string()), LABEL),
    (pa.field("observation_truncated", pa.bool_()), DETAIL),
    (pa.field("outcome", pa.string(), nullable=False), LABEL),
    (pa.field("outcome_rule", pa.string()), DETAIL),  # the rule the outcome was labeled with (always set)
    (pa.field("error_type", pa.string()), LABEL),
    (pa.field("error_message", pa.string()), LABEL),
    (pa.field("delta", DELTA, nullable=False), LABEL),
    (pa.field("delta_size", pa.int32(), nullable=False), LABEL),
    (pa.field("state_before_hash", pa.string(), nullable=False), LABEL),
    (pa.field("state_after_hash", pa.string(), nullable=False), LABEL),
    (pa.field("code_ref", pa.string()), DETAIL),
    (pa.field("env_output", pa.string()), DETAIL),  # captured stdout/stderr of the call (capped)
    (pa.field("mutated_arg", pa.string()), DETAIL),  # exploration: the argument deliberately mutated, else null
    (pa.field("adapter", pa.string()), KEY),  # the adapter that ran the environment (null only in imported samples)
]

#: the steps table: one row per executed call
STEPS = pa.schema([f for f, _ in _STEP_FIELDS])

#: what each column of the step table and of a split's samples means: the one home of these words (the card's
#: Data Fields, the DuckDB comments, the Dagster column schemas); the glossary completes closed-set columns.
COLUMN_DOCS: Described = Described(
    {
        "position": "the sample's place in the pick order (strata in "
        "composition order), as `sample_ids.txt` lists them",
        "stratum": "the benchmark cell (benchmark) or Balance2 group (SFT mixture) the sample was picked for",
        "step_id": "unique id of the step: `<trajectory_id>#<step_index>`",
        "trajectory_id": "the trajectory (replayed task, exploration episode or agent episode) the step belongs to",
        "source": "environment source (the registered sources, pipeline/envs/registry.py)",
        "adapter": "adapter that built and ran the environment in the sandbox (the builtin pack's is `envscaler`)",
        "env_id": "the environment (`<source>/<class or id>`)",
        "task_id": "the task or scenario the trajectory ran",
        "step_index": "0-based index of the step in its trajectory",
        "turn": "the user turn of a multi-turn task the call belongs to",
        "current_time": "the frozen wall clock the environment read during the call (ISO 8601, UTC); null without "
        "a recorded clock",
        "tool": "name of the tool called, `a_t`",
        "arguments_json": "the call's arguments as a JSON object",
        "args_count": "number of top-level arguments",
        "code": "source code of the called tool, `code(a_t)`",
        "code_ref": "content reference of the tool's source in `tool_code.parquet`",
        "state_before_json": "the environment state before the call, `s_t`, as canonical JSON",
        "state_after_json": "the environment state after the call, `s'_t`, as canonical JSON",
        "raw_observation": "what the tool returned, `o_t`, as text (an `Error…` message for an error step)",
        "observation_json": "the observation parsed (JSON, then Python literal) as JSON; null when it does not parse",
        "observation_truncated": "true when the observation was cut at the size cap",
        "outcome": "outcome of the call",
        "outcome_rule": "the rule `outcome` was labeled with: `default` (docs/definitions.md §4.3), or the corpus's "
        'declared rule as canonical JSON (`{"extends_default":…,"failure_if":[…]}`, docs/environments.md)',
        "error_type": "the exception type of an error step (`Timeout`, `WorkerCrash`, …); else null",
        "error_message": "the exception message of an error step; else null",
        "delta": "the state change Δ: records `{op: add|remove|replace, path: list of keys, before, after}` "
        "(values as canonical JSON)",
        "delta_size": "|Δ|, the number of Δ records",
        **{a.label: a.label_doc for a in AXES if a.label},  # the axes' label columns
        "state_before_hash": "content hash of `s_t` (its canonical JSON)",
        "state_after_hash": "content hash of `s'_t` (its canonical JSON)",
        "sample_hash": "hash of (`s_t`, `a_t`): one sample per hash, and the key of decontamination",
        "env_output": "stdout / stderr the call printed (capped)",
        "mutated_arg": "exploration: the argument deliberately mutated to provoke a failure; else null",
    }
)


def sample_schema(axes: Axes = AXES) -> pa.Schema:
    """A split's samples: the step's columns, place, stratum, rebuilt states, tool code and every axis' label."""
    step = STEPS.field
    return pa.schema(
        [
            pa.field("position", pa.int32(), nullable=False),
            pa.field("stratum", pa.string(), nullable=False),
            *map(step, ["step_id", "trajectory_id", "task_id", "env_id", "source", "step_index"]),
            step("adapter"),  # null for imported samples
            pa.field("current_time", pa.string()),  # clock.step_time(clock_start, step_index); null: no clock
            *map(step, ["tool", "arguments_json", "args_count"]),
            pa.field("code", pa.string()),
            step("code_ref"),
            pa.field("state_before_json", pa.string(), nullable=False),
            pa.field("state_after_json", pa.string(), nullable=False),
            *map(step, ["raw_observation", "observation_json", "outcome", "delta", "delta_size"]),
            *(pa.field(label, pa.string(), nullable=False) for label in axes.label_columns),
            *map(step, ["state_before_hash", "state_after_hash"]),
            pa.field("sample_hash", pa.string(), nullable=False),
        ]
    )


#: the samples of a split version (``samples.parquet``): the one definition of a sample row
SAMPLE = sample_schema()

#: Arrow type -> DuckDB type, for tables whose rows are sample (or step) rows
_DUCK_TYPES = {
    pa.string(): "VARCHAR",
    pa.int32(): "INTEGER",
    pa.int64(): "BIGINT",
    pa.bool_(): "BOOLEAN",
    pa.float64(): "DOUBLE",
}


def duck_columns(table: pa.Schema, names: Iterable[str]) -> dict[str, str]:
    """``names`` of ``table`` with their DuckDB types (a table of record's columns restated in SQL)."""
    return {n: _DUCK_TYPES[table.field(n).type] for n in names}


def step_columns(role: str) -> tuple[str, ...]:
    """The step columns of one role (:data:`KEY`, :data:`LABEL`, :data:`DETAIL`), in table order."""
    return tuple(f.name for f, r in _STEP_FIELDS if r == role)


def required_text_columns(table: pa.Schema) -> tuple[str, ...]:
    """The non-nullable string columns of ``table`` (the ones a row must fill with text)."""
    return tuple(f.name for f in table if not f.nullable and f.type == pa.string())


def encode_delta(delta: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Δ records (:func:`pipeline.core.delta.diff`) -> their stored form (:data:`DELTA`): values as
    canonical JSON text, no ``before`` for an add, no ``after`` for a remove."""
    return [
        {
            "op": rec["op"],
            "path": rec["path"],
            "before": None if rec["op"] == "add" else canonical_json(rec["before"]),
            "after": None if rec["op"] == "remove" else canonical_json(rec["after"]),
        }
        for rec in delta
    ]


def decode_delta(records: Iterable[dict[str, Any]], before: bool = True) -> list[dict[str, Any]]:
    """Stored Δ (:data:`DELTA`) -> Δ records with decoded values (``before=False``: ``before`` left None)."""
    return [
        {
            "op": r["op"],
            "path": list(r["path"]),
            "before": None if not before or r["before"] is None else json.loads(r["before"]),
            "after": None if r["after"] is None else json.loads(r["after"]),
        }
        for r in records
    ]


TOOL_CODE = pa.schema(
    [
        *fields_of(pa.string(), "code_ref", "source", "owner", "tool", "code", nullable=False),  # owner: the class
    ]
)

ENVIRONMENTS = pa.schema(
    [
        *fields_of(pa.string(), "source", "env_id", "env_class", nullable=False),
        pa.field("license", pa.string()),
        pa.field("num_tools", pa.int32(), nullable=False),
        pa.field("tools", pa.list_(pa.string())),
        *fields_of(pa.string(), "tools_json", "class_code_ref"),
    ]
)

ISSUES = pa.schema(
    [
        pa.field("stage", pa.string(), nullable=False),
        pa.field("task_id", pa.string()),
        pa.field("trajectory_id", pa.string()),
        pa.field("reason", pa.string(), nullable=False),
        pa.field("origin", pa.string()),
    ]
)
