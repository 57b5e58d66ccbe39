"""Arrow schemas of the tables of record (DESIGN §4.4).

States are never stored twice per step: ``trajectories`` holds each initial state once, ``steps``
holds Δ plus content hashes of ``s_t``/``s'_t``; ``tool_code`` holds each tool's source once,
referenced by ``code_ref``.
"""

from __future__ import annotations

import pyarrow as pa

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
        pa.field("tool", pa.string()),
        pa.field("arguments_json", pa.string()),
        pa.field("call", pa.string()),
        pa.field("mutated_arg", pa.string()),  # exploration: the argument deliberately mutated
        pa.field("observed_after_hash", pa.string()),  # exploration: s'_t hash when the policy ran it
    ]
)

TRAJECTORIES = pa.schema(
    [
        pa.field("trajectory_id", pa.string(), nullable=False),
        pa.field("source", pa.string(), nullable=False),
        pa.field("env_id", pa.string(), nullable=False),
        pa.field("task_id", pa.string(), nullable=False),
        pa.field("category", pa.string()),
        pa.field("strategy", pa.string()),
        pa.field("fingerprint", pa.string(), nullable=False),
        pa.field("env_options_json", pa.string()),
        pa.field("init_config_json", pa.string()),
        pa.field("initial_state_json", pa.string(), nullable=False),
        pa.field("initial_state_hash", pa.string(), nullable=False),
        pa.field("num_actions", pa.int32(), nullable=False),
        pa.field("actions", pa.list_(ACTION)),
        pa.field("messages_json", pa.string()),  # agent trajectories: the full OpenAI message history
        pa.field("seed", pa.int64()),  # run seed of the sandbox's seeded randomness
        pa.field("clock_start", pa.string()),  # start of the trajectory's frozen clock (ISO 8601, UTC)
    ]
)

STEPS = pa.schema(
    [
        pa.field("step_id", pa.string(), nullable=False),
        pa.field("trajectory_id", pa.string(), nullable=False),
        pa.field("source", pa.string(), nullable=False),
        pa.field("env_id", pa.string(), nullable=False),
        pa.field("task_id", pa.string(), nullable=False),
        pa.field("step_index", pa.int32(), nullable=False),
        pa.field("turn", pa.int32()),
        pa.field("tool", pa.string(), nullable=False),
        pa.field("arguments_json", pa.string(), nullable=False),
        pa.field("args_count", pa.int32(), nullable=False),
        pa.field("raw_observation", pa.string(), nullable=False),
        pa.field("observation_json", pa.string()),
        pa.field("observation_truncated", pa.bool_()),
        pa.field("outcome", pa.string(), nullable=False),
        pa.field("error_type", pa.string()),
        pa.field("error_message", pa.string()),
        pa.field("delta", DELTA, nullable=False),
        pa.field("delta_size", pa.int32(), nullable=False),
        pa.field("state_before_hash", pa.string(), nullable=False),
        pa.field("state_after_hash", pa.string(), nullable=False),
        pa.field("code_ref", pa.string()),
        pa.field("env_output", pa.string()),  # captured stdout/stderr of the call (capped)
        pa.field("mutated_arg", pa.string()),  # exploration: the argument deliberately mutated, else null
    ]
)

TOOL_CODE = pa.schema(
    [
        pa.field("code_ref", pa.string(), nullable=False),
        pa.field("source", pa.string(), nullable=False),
        pa.field("owner", pa.string(), nullable=False),  # class that implements the tool
        pa.field("tool", pa.string(), nullable=False),
        pa.field("code", pa.string(), nullable=False),
    ]
)

ENVIRONMENTS = pa.schema(
    [
        pa.field("source", pa.string(), nullable=False),
        pa.field("env_id", pa.string(), nullable=False),
        pa.field("env_class", pa.string(), nullable=False),
        pa.field("license", pa.string()),
        pa.field("num_tools", pa.int32(), nullable=False),
        pa.field("tools", pa.list_(pa.string())),
        pa.field("tools_json", pa.string()),
        pa.field("class_code_ref", pa.string()),
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
