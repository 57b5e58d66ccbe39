"""One served episode, the core every front end shares (the OpenEnv server, the ``gem.Env`` and TRL adapters).

``reset(seed, episode_id, task_id)`` opens a live sandbox session on the task's environment (the same arguments
give the same observations and states: the frozen clock and seeds come from the task and seed). ``call_tool``
runs the call and answers with the observation, ``reward`` and ``done``, and ``metadata`` holding the executor's
labels of the step. Modes:

- ``exec``: the observation is the executable environment's.
- ``sim``: a simulator (``simulator_eval``'s ``simulators`` settings: ``oracle``, ``no_change``, an
  OpenAI-compatible endpoint) answers; its state is carried by its own predicted ``config_changes``.
- ``shadow``: as ``sim``, and ``metadata`` holds, per step, ``fm``, ``cm`` and ``drift`` measured as
  :mod:`pipeline.rollouts.loop` measures them, and the executable observation.

The executor runs every call in every mode, and the reward is always the mean of the task's checks on the *real*
state (a drifting simulator cannot fake it); a task without checks is served with reward ``None`` and a note.
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import Callable
from typing import Any

from pipeline.core.clock import derive_clock_start, step_time
from pipeline.core.delta import diff
from pipeline.core.protocol import ChangeError
from pipeline.envs import registry
from pipeline.evaluate.metrics import feedback_match
from pipeline.evaluate.parsing import parse_answer
from pipeline.evaluate.simulator_spec import Simulator
from pipeline.rollouts.loop import ToolCode, config_match, feedback_text, predicted_state, simulator_sample, tool_call
from pipeline.serve.sessions import Session, SessionError, SessionPool, StepResult
from pipeline.serve.tasks import ServedTask

MODES = ("exec", "sim", "shadow")
#: the labels of a step that go in an observation's ``metadata``
LABEL_FIELDS = ("step_index", "outcome", "delta", "delta_size", "state_before_hash", "state_after_hash", "error_type")


def reward_of(checks: list[bool | None] | None) -> float | None:
    """The mean of the checks' verdicts (a check that raised counts as failed); None when there are none."""
    if not checks:
        return None
    return sum(1.0 for c in checks if c) / len(checks)


class _Loop:
    """One event loop thread for the simulators' coroutines (an endpoint client stays on one loop)."""

    _loop: asyncio.AbstractEventLoop | None = None
    _lock = threading.Lock()

    @classmethod
    def run(cls, coro: Any) -> Any:
        with cls._lock:
            if cls._loop is None:
                cls._loop = asyncio.new_event_loop()
                threading.Thread(target=cls._loop.run_forever, name="serve-simulator", daemon=True).start()
        return asyncio.run_coroutine_threadsafe(coro, cls._loop).result()


def mcp_tools(task: ServedTask) -> list[dict[str, Any]]:
    """The task's tools as MCP tool specs (``name``, ``description``, ``input_schema``) from its OpenAI schemas."""
    return [
        {
            "name": fn.get("name", ""),
            "description": fn.get("description", ""),
            "input_schema": fn.get("parameters") or {"type": "object", "properties": {}},
        }
        for fn in (schema.get("function", schema) for schema in task.tools)
    ]


class Episode:
    """A served episode over a :class:`SessionPool` (see the module docstring). Not thread-safe: one caller."""

    def __init__(
        self,
        pool: SessionPool,
        tasks: list[ServedTask],
        mode: str = "exec",
        simulator: Simulator | None = None,
        max_steps: int = 30,
        record: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode {mode!r} is not one of {', '.join(MODES)}")
        if mode != "exec" and simulator is None:
            raise ValueError(f"mode {mode} needs a simulator (--simulator oracle | no_change | a configured one)")
        self.pool, self.mode, self.simulator, self.max_steps = pool, mode, simulator, max_steps
        self.tasks = {t.task_id: t for t in tasks}
        self._names: dict[str, frozenset[str]] = {}  # each task's tool names (a call's name is checked against them)
        self.order = [t.task_id for t in tasks]
        self.record = record
        self.code = ToolCode()
        self.session: Session | None = None
        self.task: ServedTask | None = None
        self.episode_id: str | None = None
        self.seed = 0
        self.target: str | None = None  # a task rewarded by its reference: the state it must reach
        self.sim_state: Any = None
        self.rows: list[dict[str, Any]] = []
        self.done = False
        self.reward: float | None = None

    # -- the episode -----------------------------------------------------------------------------------
    def reset(
        self, seed: int | None = None, episode_id: str | None = None, task_id: str | None = None
    ) -> dict[str, Any]:
        """Start an episode on ``task_id`` (default: the task at ``seed`` modulo the number of tasks); the
        observation payload (``observation`` with the task text and tools, ``reward`` None, ``done`` False)."""
        self.close()
        self.seed = int(seed or 0)
        if task_id is None:
            if not self.order:
                raise SessionError("no tasks to serve")
            task_id = self.order[self.seed % len(self.order)]
        task = self.tasks.get(str(task_id))
        if task is None:
            raise SessionError(f"unknown task_id {str(task_id)[:200]!r}: list them at /tasks")
        self.task = task
        self.episode_id = episode_id or f"{task.task_id}/{self.seed}"
        self.target = self._reference_hash(task) if task.reference else None
        self.session = self.pool.open(task.env, f"served/{task.task_id}/{self.seed}", self.seed, list(task.checks))
        self.sim_state = self.session.state
        self.rows, self.done = [], False
        self.reward = self._reward(task, self.session.labels.state_hash, self.session.initial_checks)
        metadata = {
            "task_id": task.task_id,
            "env_id": task.env.env_id,
            "mode": self.mode,
            "episode_id": self.episode_id,
        }
        if task.note:
            metadata["reward_note"] = task.note
        return {
            "observation": {"task": task.text, "tools": mcp_tools(task), "metadata": metadata},
            "reward": None,
            "done": False,
        }

    def list_tools(self) -> dict[str, Any]:
        return {"observation": {"tools": mcp_tools(self._task()), "metadata": {}}, "reward": None, "done": self.done}

    def call_tool(self, tool_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Run one call (in every mode on the real environment); the observation payload."""
        refused = self._refusal(tool_name, arguments)
        if refused is not None:
            return refused
        real_before = self.session.state  # type: ignore[union-attr]
        return self._answer(tool_name, arguments, real_before, self.session.call(tool_name, arguments))  # type: ignore[union-attr]

    async def call_tool_async(self, tool_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """:meth:`call_tool` on a running event loop, with no worker thread: exec mode only (the other modes ask
        a simulator, a blocking call, after the step)."""
        if self.mode != "exec":
            raise ValueError(f"call_tool_async serves exec mode, not {self.mode}")
        refused = self._refusal(tool_name, arguments)
        if refused is not None:
            return refused
        real_before = self.session.state  # type: ignore[union-attr]
        step = await self.session.call_async(tool_name, arguments)  # type: ignore[union-attr]
        return self._answer(tool_name, arguments, real_before, step)

    def _refusal(self, tool_name: str, arguments: Any) -> dict[str, Any] | None:
        """The error observation of a call that does not reach the environment (None: it may run)."""
        task = self._task()
        if self.done or self.session is None:
            return self._error(tool_name, "episode is done: reset to start another")
        names = self._names.get(task.task_id)
        if names is None:
            names = self._names[task.task_id] = frozenset(t["name"] for t in mcp_tools(task))
        if tool_name not in names:
            return self._error(
                tool_name, f"unknown tool {tool_name[:100]!r}; tools: {', '.join(sorted(names))}", "tool_not_found"
            )
        if not isinstance(arguments, dict):
            return self._error(tool_name, "arguments must be a JSON object", "invalid_args")
        return None

    def _answer(self, tool_name: str, arguments: dict[str, Any], real_before: Any, step: StepResult) -> dict[str, Any]:
        """The observation payload of a call the environment ran (``step``), recorded in the episode."""
        task = self._task()
        index = len(self.rows)
        self.reward = self._reward(task, step.labels["state_after_hash"], step.checks)
        metadata: dict[str, Any] = {k: step.labels.get(k) for k in LABEL_FIELDS}
        metadata["checks"] = step.checks
        if task.note:
            metadata["reward_note"] = task.note
        result: Any = step.observation
        if self.mode != "exec":
            sim = self._simulate(index, tool_name, step.labels, real_before, step.state)
            result = sim.pop("feedback")
            if self.mode == "shadow":
                metadata.update(sim, real_observation=step.observation)
        self.done = not step.alive or index + 1 >= self.max_steps
        if not step.alive:
            metadata["error"] = step.labels.get("error_message")
        row = {"tool": tool_name, "arguments": arguments, "observation": result, "reward": self.reward, **metadata}
        self.rows.append(row)
        if self.done:
            self._finish()
        return {
            "observation": {"tool_name": tool_name, "result": result, "error": None, "metadata": metadata},
            "reward": self.reward,
            "done": self.done,
        }

    def state(self) -> dict[str, Any]:
        """OpenEnv's ``State``: ``episode_id``, ``step_count``, and the task, mode and the state the agent's
        world is in (the simulator's in sim/shadow, else the real one)."""
        real = self.session.state if self.session is not None else None
        return {
            "episode_id": self.episode_id,
            "step_count": len(self.rows),
            "task_id": self.task.task_id if self.task else None,
            "mode": self.mode,
            "state": real if self.mode == "exec" else self.sim_state,
        }

    def close(self) -> None:
        """End the episode (recorded when it took a step) and its session."""
        if self.session is not None:
            if not self.done and self.rows:
                self._finish()
            self.session.close()
            self.session = None

    # -- helpers ---------------------------------------------------------------------------------------
    _targets: dict[tuple[str, int], str | None] = {}  # the reference's final state hash, by (task, seed)
    _targets_lock = threading.Lock()

    def _reference_hash(self, task: ServedTask) -> str | None:
        """The hash of the state the task's ground-truth calls leave, from the same episode name and seed (run once
        per task and seed in a session of its own); None when the replay fails."""
        key = (task.task_id, self.seed)
        with self._targets_lock:
            if key in self._targets:
                return self._targets[key]
        session = self.pool.open(task.env, f"served/{task.task_id}/{self.seed}", self.seed)
        try:
            for tool, arguments in task.reference:
                if not session.call(tool, arguments).alive:
                    break
            target = session.labels.state_hash if session.closed is None else None
        finally:
            session.close()
        with self._targets_lock:
            self._targets[key] = target
        return target

    def _reward(self, task: ServedTask, state_hash: str | None, checks: list[bool | None] | None) -> float | None:
        """The reward of a state (the initial one is an episode's until a valid call changes it: a reply that is no
        call, or a call of an unknown tool, is rewarded by the state as it is): its checks' mean, or whether it is the
        reference's final state."""
        if self.target is not None:
            return 1.0 if state_hash == self.target else 0.0
        return reward_of(checks) if task.checks else None

    def _task(self) -> ServedTask:
        if self.task is None:
            raise SessionError("no episode: send reset first")
        return self.task

    def _error(self, tool_name: str, message: str, kind: str = "execution_error") -> dict[str, Any]:
        return {
            "observation": {
                "tool_name": tool_name,
                "result": None,
                "error": {"error_type": kind, "message": message},
                "metadata": {},
            },
            "reward": self.reward,
            "done": self.done,
        }

    def _finish(self) -> None:
        self.done = True
        if self.record is not None and self.task is not None:
            self.record(self._record())

    def _record(self) -> dict[str, Any]:
        """The episode as recorded: a message-history record (``task_id``, ``env``, ``messages``: the task as the
        user turn, each call and what the agent saw), which the ``served`` source (:mod:`pipeline.envs.sources.served`)
        replays and labels; plus the task served, mode, simulator, seed, rewards and each step's metadata.
        Its ``task_id`` is the served task's with the episode's and a unique suffix (one record per episode)."""
        task = self._task()
        messages: list[dict[str, Any]] = [{"role": "user", "content": task.text}]
        for k, row in enumerate(self.rows):
            call = tool_call(f"call_{k}", row["tool"], json.dumps(row["arguments"], ensure_ascii=False))
            messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
            messages.append({"role": "tool", "tool_call_id": f"call_{k}", "content": feedback_text(row["observation"])})
        env = task.env
        return {
            "task_id": f"{task.task_id}/{self.episode_id}/{uuid.uuid4().hex[:12]}",
            "served_task_id": task.task_id,
            "episode_id": self.episode_id,
            "env": {"source": env.source, "env_id": env.env_id, "init_config": env.init_config, "options": env.options},
            "messages": messages,
            "source": registry.source_of(env),
            "mode": self.mode,
            "simulator": self.simulator.spec.name if self.simulator is not None else None,
            "seed": self.seed,
            "reward": self.reward,
            "steps": self.rows,
        }

    def _simulate(
        self, index: int, tool: str, labels: dict[str, Any], real_before: Any, real_after: Any
    ) -> dict[str, Any]:
        """The simulator's answer for the step from its own state ŝ, scored as the rollouts score it: ``fm``,
        ``cm`` (right from where the simulator is), ``drift`` (|diff(ŝ', s')|); ŝ moves by its predicted changes."""
        task, sim_before = self._task(), self.sim_state
        now = step_time(derive_clock_start(f"served/{task.task_id}/{self.seed}", self.seed), index)
        code = self.code.code(task.env, tool)
        sample = simulator_sample(
            f"{self.episode_id}#{index}", sim_before, tool, labels, code=code, env_id=task.env.env_id, current_time=now
        )
        completion = _Loop.run(self.simulator.complete(sample))  # type: ignore[union-attr]
        out: dict[str, Any] = {
            "fm": False,
            "cm": False,
            "drift": None,
            "drift_before": len(diff(sim_before, real_before)),
        }
        parsed = parse_answer(completion.text)
        if completion.error is not None or not parsed.ok:
            out["feedback"] = f"Error: the simulator gave no usable answer ({completion.error or parsed.error})"
            out["sim_error"] = completion.error or parsed.error
            return out
        predicted = parsed.answer or {}
        changes = predicted.get("config_changes", [])
        feedback = predicted.get("feedback")
        out["feedback"] = feedback_text(feedback)
        out["fm"] = feedback_match(feedback, labels["raw_observation"])
        try:
            sim_after = predicted_state(sim_before, changes)
        except ChangeError as exc:
            out["sim_error"] = str(exc)
            sim_after = sim_before
        out["cm"] = config_match(labels["delta"], sim_before, sim_after)
        out["drift"] = len(diff(sim_after, real_after))
        self.sim_state = sim_after
        return out
