"""Execute one trajectory against a live environment (runs inside a sandbox child).

The child reports *raw data* only (per call the return value, the observation text, whether it raised, and the
state when it changed); every label is computed outside the sandbox (:mod:`pipeline.execution.labels`), so code
inside cannot forge one.
"""

from __future__ import annotations

import io
import json
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pipeline.core.canonical import Snapshots, canonical_json, canonicalize, stored_json
from pipeline.core.fields import setting
from pipeline.core.trajectory import Trajectory
from pipeline.envs import registry
from pipeline.execution import freeze
from pipeline.execution.policy import ExplorationPolicy

Send = Callable[[dict[str, Any]], None]


class OutputLimitExceeded(RuntimeError):
    """Environment code printed more than the sandbox allows."""


class CappedOutput(io.TextIOBase):
    """A text stream that keeps the first ``limit`` characters and raises past them."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.parts: list[str] = []
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if self.size + len(text) > self.limit:
            keep = self.limit - self.size
            if keep > 0:
                self.parts.append(text[:keep])
                self.size = self.limit
            raise OutputLimitExceeded(f"sandbox: output limit of {self.limit} characters exceeded")
        self.parts.append(text)
        self.size += len(text)
        return len(text)

    def getvalue(self) -> str:
        return "".join(self.parts)


def describe_exit(code: int) -> str:
    """A process's end as :meth:`subprocess.Popen.returncode` gives it (negative: the signal)."""
    return f"killed by signal {signal.Signals(-code).name}" if code < 0 else f"exited with code {code}"


#: a return value longer than this (canonical JSON) is not read back by the exploration policy
_OBSERVED_CHARS = 16_384


@dataclass(frozen=True)
class Limits:
    """Resource limits for executing untrusted environment code."""

    call_timeout_s: float = setting(10.0, "Wall-clock limit of one tool call (and of a reset).")
    memory_mb: int = setting(2048, "Address-space allowance per trajectory process, MiB.")
    max_observation_chars: int = setting(65_536, "Longer observations are truncated and flagged.")
    max_output_chars: int = setting(8_192, "stdout/stderr kept per call; more raises in the call.")
    max_restarts: int = setting(3, "Lost (hung/crashed) calls tolerated per trajectory.")
    max_state_mb: int = setting(16, "Largest state (or return value) a call may produce, MiB; a larger one is refused.")
    tmp_mb: int = setting(256, "Size of each worker's private /tmp (tmpfs), MiB.")
    reuse_children: int = setting(
        16,
        "Trajectories per forked child of the builtin pack's and bfcl's code (1: a fork per "
        "trajectory); a corpus's code always runs each trajectory in a fresh child.",
    )


class _Snapshots:
    """The environment's canonical state text in its own key order (``stored_json``), sent only when it changed."""

    def __init__(self, env: Any, limit_chars: int) -> None:
        self.env = env
        self.limit = limit_chars
        self.text: str | None = None
        self.value: Any = None
        #: an environment that gives its attributes (``state_parts``) is snapshotted again only where it changed
        self.parts = getattr(env, "state_parts", None)
        self.incremental = Snapshots()

    def take(self) -> str | None:
        if self.parts is not None:
            value, text = self.incremental.take(self.parts())
        else:
            value = self.env.state()
            text = stored_json(value)
        if len(text) > self.limit:
            raise MemoryError(f"state of {len(text)} characters exceeds the {self.limit}-character limit")
        self.value = value
        if text == self.text:
            return None
        self.text = text
        return text


def _call(env: Any, index: int, action: Any, snapshots: _Snapshots, limits: Limits) -> dict[str, Any]:
    captured = CappedOutput(limits.max_output_chars)
    saved = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = captured  # print() inside env code; a flood raises inside the call
    if freeze.installed():
        freeze.at_step(index)
    t0 = freeze.REAL.perf_counter()
    try:
        result = env.call(action.name, action.arguments)
    finally:
        sys.stdout, sys.stderr = saved
    elapsed = freeze.REAL.perf_counter() - t0
    raw = env.observation(result)
    value_text = None
    if not result.raised:
        value_text = canonical_json(canonicalize(result.value))
        if len(value_text) > limits.max_observation_chars:
            value_text = None  # too large to keep parsed; the observation text says it was cut
    return {
        "kind": "step",
        "step_index": index,
        "turn": action.turn,
        "tool": action.name,
        "arguments": action.arguments,
        "raised": result.raised,
        "error_type": result.error_type,
        "error_message": None if result.error_message is None else result.error_message[: limits.max_observation_chars],
        "observation": raw[: limits.max_observation_chars + 1],
        "value": value_text,
        "state": snapshots.take(),
        "call_seconds": elapsed,
        "env_output": captured.getvalue() or None,
    }


def execute(
    trajectory: Trajectory,
    send: Send,
    limits: Limits,
    start: int = 0,
    skip: frozenset[int] = frozenset(),
) -> None:
    """Reset the environment and stream raw step data from ``start`` on: actions before it are replayed silently
    (the rebuilt state is sent with ``resumed`` and checked outside); actions in ``skip`` (lost) are not run."""
    try:
        env = registry.build(trajectory.env)
        snapshots = _Snapshots(env, limits.max_state_mb << 20)
        initial = snapshots.take()
    except Exception as exc:
        send({"kind": "init_error", "error": f"{type(exc).__name__}: {str(exc)[:2000]}"})
        return
    if start == 0:
        send({"kind": "init", "state": initial})
    explore = trajectory.meta.get("explore")
    if explore is not None:  # actions are chosen live by the exploration policy
        policy = ExplorationPolicy(env.tools, explore)
        index = 0
        while (action := policy.next_action(snapshots.value, index, snapshots.text)) is not None:
            send(
                {
                    "kind": "action",
                    "step_index": index,
                    "tool": action.name,
                    "arguments": action.arguments,
                    "mutated_arg": action.mutated_arg,
                }
            )
            step = _call(env, index, action, snapshots, limits)
            send(step)
            if explore.relational and step["value"] is not None and len(step["value"]) <= _OBSERVED_CHARS:
                policy.observe(action.arguments, json.loads(step["value"]))  # answers later calls may use
            index += 1
        send({"kind": "done"})
        return
    for index, action in enumerate(trajectory.actions):
        if index in skip:
            continue
        if index < start:
            send({"kind": "tick", "step_index": index})
            if freeze.installed():
                freeze.at_step(index)
            env.call(action.name, action.arguments)
            continue
        if index == start and start > 0:
            snapshots.text = None
            send({"kind": "resumed", "step_index": index, "state": snapshots.take()})
        send(_call(env, index, action, snapshots, limits))
    send({"kind": "done"})
