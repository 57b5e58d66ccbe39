"""Execute one trajectory against a live environment and label every step (runs in a sandbox child).

For each action: call the tool, snapshot the canonical state, and compute the step's labels —
observation (raw text and parsed value), outcome, ``args_count``, Δ, |Δ| and the hashes of
``s_t`` and ``s'_t``.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Any, Callable

from pipeline.collect.policy import ExplorationPolicy
from pipeline.collect.trajectory import Trajectory
from pipeline.envs import registry
from pipeline.execution.guards import CappedOutput
from pipeline.labeling.outcome import args_count
from pipeline.state.canonical import canonical_json, canonicalize, state_hash
from pipeline.state.delta import diff

Send = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class Limits:
    """Resource limits for executing untrusted environment code."""

    call_timeout_s: float = 10.0
    memory_mb: int = 2048
    max_observation_chars: int = 65_536
    max_output_chars: int = 8_192
    max_restarts: int = 3


def _json_or_none(value: Any) -> str | None:
    return None if value is None else canonical_json(value)


def label_step(env: Any, index: int, action: Any, before: Any, before_hash: str, limits: Limits) -> tuple[dict[str, Any], Any, str]:
    """Run one action and return (step labels, state after, hash after)."""
    captured = CappedOutput(limits.max_output_chars)
    saved = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = captured  # print() inside env code; a flood raises inside the call
    t0 = time.perf_counter()
    try:
        result = env.call(action.name, action.arguments)
    finally:
        sys.stdout, sys.stderr = saved
    elapsed = time.perf_counter() - t0
    after = env.state()
    after_hash = state_hash(after)
    raw = env.observation(result)
    truncated = len(raw) > limits.max_observation_chars
    if truncated:
        raw = raw[: limits.max_observation_chars]
    parsed = None if result.raised else canonicalize(result.value)
    parsed_json = canonical_json(parsed) if not result.raised else None
    if parsed_json is not None and len(parsed_json) > limits.max_observation_chars:
        parsed_json, truncated = None, True
    delta = diff(before, after)
    step = {
        "kind": "step",
        "step_index": index,
        "turn": action.turn,
        "tool": action.name,
        "arguments_json": canonical_json(canonicalize(action.arguments)),
        "args_count": args_count(action.arguments),
        "raw_observation": raw,
        "observation_json": parsed_json,
        "observation_truncated": truncated,
        "outcome": env.outcome(action.name, result),
        "error_type": result.error_type,
        "error_message": result.error_message,
        "delta": [
            {
                "op": rec["op"],
                "path": rec["path"],
                "before": None if rec["op"] == "add" else canonical_json(rec["before"]),
                "after": None if rec["op"] == "remove" else canonical_json(rec["after"]),
            }
            for rec in delta
        ],
        "delta_size": len(delta),
        "state_before_hash": before_hash,
        "state_after_hash": after_hash,
        "call_seconds": elapsed,
        "env_output": captured.getvalue() or None,
    }
    return step, after, after_hash


def execute(
    trajectory: Trajectory,
    send: Send,
    limits: Limits,
    start: int = 0,
    skip: frozenset[int] = frozenset(),
    expected_hash: str | None = None,
) -> None:
    """Reset the environment and stream labeled steps from ``start`` on.

    Actions before ``start`` are replayed silently (after a killed call, a fresh process rebuilds
    the state), actions in ``skip`` are not executed (their call was lost), and the rebuilt state
    must match ``expected_hash``.
    """
    try:
        env = registry.build(trajectory.env)
        state = env.state()
        state_text = canonical_json(state)
    except Exception as exc:
        send({"kind": "init_error", "error": f"{type(exc).__name__}: {exc}"})
        return
    current_hash = state_hash(state)
    if start == 0:
        send({"kind": "init", "state_json": state_text, "state_hash": current_hash})
    explore = trajectory.meta.get("explore")
    if explore is not None:  # actions are chosen live by the exploration policy
        policy = ExplorationPolicy(env.tools, explore)
        index = 0
        while (action := policy.next_action(state, index)) is not None:
            send({"kind": "action", "step_index": index, "tool": action.name, "arguments": action.arguments})
            step, state, current_hash = label_step(env, index, action, state, current_hash, limits)
            send(step)
            index += 1
        send({"kind": "done"})
        return
    for index, action in enumerate(trajectory.actions):
        if index in skip:
            continue
        if index < start:
            send({"kind": "tick", "step_index": index})
            env.call(action.name, action.arguments)
            state = env.state()
            continue
        if index == start and start > 0:
            current_hash = state_hash(state)
            if expected_hash is not None and current_hash != expected_hash:
                send({
                    "kind": "resume_mismatch",
                    "error": f"rebuilt state before step {index} has hash {current_hash}, expected {expected_hash}",
                })
                return
            send({"kind": "resumed", "step_index": index})
        step, state, current_hash = label_step(env, index, action, state, current_hash, limits)
        send(step)
    send({"kind": "done"})
