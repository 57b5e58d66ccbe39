"""The executor shadow: the agent's actions run on the real environment in the sandbox, from the real
initial state, and the real states are rebuilt from the initial state and the executor's Δs (verified by
hash). The agent never sees these observations — it sees the simulator's — so the actions can be run
after the simulator has answered (recorded actions: all at once, up front)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pipeline.core.canonical import state_hash
from pipeline.core.clock import derive_clock_start, step_time
from pipeline.core.delta import DeltaError, apply
from pipeline.core.environment import EnvSpec
from pipeline.core.trajectory import Action, Trajectory
from pipeline.execution.sandbox import Sandbox
from pipeline.store.schema import decode_delta


@dataclass
class RealRun:
    """What the executor did with an action sequence: the real initial state, the labeled steps (sandbox
    step dicts, by index) and the real states ``states[k]`` = s_k (``states[k+1]`` = s'_k)."""

    initial: Any = None
    steps: dict[int, dict[str, Any]] = field(default_factory=dict)
    states: list[Any] = field(default_factory=list)
    error: str | None = None  # the reset failed, or a step could not be reproduced
    issues: list[str] = field(default_factory=list)  # the sandbox's notes (lost calls, restarts)

    def step(self, index: int) -> dict[str, Any] | None:
        return self.steps.get(index) if index + 1 < len(self.states) else None


def real_run(result: dict[str, Any]) -> RealRun:
    """A sandbox result -> the real states, each checked against the executor's hash."""
    if result.get("init") is None:
        return RealRun(error=f"reset failed: {result.get('init_error')}")
    state = json.loads(result["init"]["state_json"])
    steps = {s["step_index"]: s for s in result.get("steps", [])}
    run = RealRun(state, steps, [state], issues=list(result.get("issues") or []))
    index = 0
    while index in run.steps:
        step = run.steps[index]
        try:
            state = apply(decode_delta(step["delta"]), state)
        except DeltaError as exc:
            run.error = f"step {index}: the executor's Δ does not apply: {exc}"
            break
        if state_hash(state) != step["state_after_hash"]:
            run.error = f"step {index}: rebuilt s'_t does not match the executor's hash"
            break
        run.states.append(state)
        index += 1
    return run


def _trajectory(key: str, task_id: str, env: EnvSpec, actions: Sequence[Action]) -> Trajectory:
    return Trajectory(f"rollout-shadow/{key}", task_id, env, tuple(actions), strategy="shadow")


def shadow_time(key: str, index: int) -> str:
    """The frozen clock of the shadow trajectory at action ``index`` (stated in the simulator's prompt)."""
    return step_time(derive_clock_start(f"rollout-shadow/{key}", 0), index)


def shadow_all(sandbox: Sandbox, jobs: Iterable[tuple[str, str, EnvSpec, Sequence[Action]]]) -> dict[str, RealRun]:
    """Run every ``(key, task_id, env, actions)`` on the real environment; results by key."""
    trajectories = [_trajectory(*job) for job in jobs]
    keys = {t.trajectory_id: t.trajectory_id.removeprefix("rollout-shadow/") for t in trajectories}
    return {keys[t.trajectory_id]: real_run(result) for t, result in sandbox.run(trajectories)}


def shadow_prefix(sandbox: Sandbox, key: str, task_id: str, env: EnvSpec, actions: Sequence[Action]) -> RealRun:
    """The actions so far, re-run in a fresh sandbox child (an LLM agent's next action is only known now)."""
    [(_, result)] = list(sandbox.run([_trajectory(key, task_id, env, actions)]))
    return real_run(result)
