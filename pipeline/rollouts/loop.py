"""Closed-loop simulated rollouts with an executor shadow (Simia; docs/definitions.md §9, docs/evaluation.md
``simulated_rollouts``).

An agent acts (a recorded trajectory's actions, or an LLM agent) and a *simulator* plays the environment from its
own previous predicted state ŝ_k; the executor shadows every action on the real environment
(:mod:`pipeline.rollouts.shadow`), which gives per step ``fm``, ``cm`` (right from where the simulator is),
``drift_before`` / ``drift``, ``diverged_before`` and ``state_match``, and per rollout the first divergence and
the final drift. Each rollout keeps its conversation and the tool schemas the agent was given, for the SFT export
(:mod:`pipeline.rollouts.sft`). An unparseable answer or changes that do not apply stop the rollout
(``parse_failure`` / ``invalid_changes``), a failed request stops it for this run (``request_error``); completed
requests are in the run's :class:`~pipeline.rollouts.requests.RequestLog`, so a re-run replays them.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pipeline.core.axes import AXES
from pipeline.core.bounds import long_path
from pipeline.core.canonical import canonical_json
from pipeline.core.delta import DeltaError, apply, diff
from pipeline.core.environment import EnvSpec
from pipeline.core.progress import Log
from pipeline.core.protocol import ChangeError, apply_changes, messages
from pipeline.core.trajectory import Action
from pipeline.envs import registry
from pipeline.evaluate.metrics import feedback_match
from pipeline.evaluate.parsing import parse_answer
from pipeline.evaluate.simulators import Completion, EndpointError, Simulator, kind_of
from pipeline.execution.sandbox import Sandbox
from pipeline.models.agent_settings import AGENT_SYSTEM_PROMPT, AgentSettings
from pipeline.models.openai_client import async_client, openai
from pipeline.rollouts.requests import RequestLog, prompt_key
from pipeline.rollouts.shadow import RealRun, shadow_all, shadow_prefix, shadow_time
from pipeline.store.schema import decode_delta

RECORDED = "recorded"  # the agent that replays the actions of recorded trajectories

#: how a rollout ended
DONE, STEP_LIMIT, PARSE_FAILURE, INVALID_CHANGES = "done", "step_limit", "parse_failure", "invalid_changes"
REQUEST_ERROR, SHADOW_ERROR, AGENT_ERROR = "request_error", "shadow_error", "agent_error"


@dataclass(frozen=True)
class RolloutTask:
    """A task to roll out: the environment, the recorded ``actions`` (replayed when no LLM agent acts) and the
    task's user ``turns`` — what an LLM agent works through, or what the recorded trajectory's agent was asked
    (empty when that is not known: the conversation then has no user turn). ``key`` is unique within a task
    set (a trajectory id, a task id)."""

    key: str
    task_id: str
    env: EnvSpec
    actions: tuple[Action, ...] = ()
    turns: tuple[str, ...] = ()


@dataclass
class RolloutReport:
    run_id: str
    rollouts: int = 0
    steps: int = 0
    asked: int = 0  # model requests sent in this run
    reused: int = 0  # answers replayed from the request log
    statuses: Counter[str] = field(default_factory=Counter)
    parse_failures: int = 0
    seconds: float = 0.0


def run_id(simulator: str, agent: str) -> str:
    return f"{simulator}@{agent}"


class ToolCode:
    """``code(a_t)`` per (environment, tool), from the static environment (memoised)."""

    def __init__(self) -> None:
        self._code: dict[tuple[str, str, str], str | None] = {}
        self._tools: dict[tuple[str, str], list[dict[str, Any]]] = {}

    @staticmethod
    def _env_key(env: EnvSpec) -> tuple[str, str]:
        return env.source, json.dumps(env.options, sort_keys=True)

    def code(self, env: EnvSpec, tool: str) -> str | None:
        key = (*self._env_key(env), tool)
        if key not in self._code:
            try:
                static = registry.build_without_reset(env)
                self._code[key] = static.source_of(tool) if static.has_tool(tool) else None
            except Exception:
                self._code[key] = None
        return self._code[key]

    def tools(self, env: EnvSpec) -> list[dict[str, Any]]:
        """The environment's tool schemas as an agent is given them (:func:`pipeline.envs.registry.tool_schemas`,
        memoised); raises when the environment cannot be built."""
        key = self._env_key(env)
        if key not in self._tools:
            self._tools[key] = registry.tool_schemas(env)
        return self._tools[key]


def feedback_text(feedback: Any) -> str:
    """The simulated feedback as the agent sees it (a tool message's content)."""
    return feedback if isinstance(feedback, str) else json.dumps(feedback, ensure_ascii=False)


def tool_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    """An item of an assistant message's ``tool_calls``, as the OpenAI API writes it."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def simulator_sample(
    step_id: str, sim_before: Any, tool: str, labels: dict[str, Any], **context: Any
) -> dict[str, Any]:
    """What a simulator is asked for a step played from its own state ``sim_before``: the action, and the executor's
    ``labels`` of it (what the oracle answers with; a model never sees them); ``context``: ``code``, ``env_id``,
    ``current_time`` (the executor's frozen clock at this call)."""
    return {
        "step_id": step_id,
        "state_before_json": canonical_json(sim_before),
        "tool": tool,
        "arguments_json": labels["arguments_json"],
        **{k: labels[k] for k in ("raw_observation", "delta", "outcome", "delta_size", "args_count")},
        **context,
    }


def predicted_state(sim_before: Any, changes: Any) -> Any:
    """ŝ' from the simulator's predicted changes; :class:`ChangeError` when they do not apply (a path of 200 000
    parts, which would take resolve_path quadratic time, does not either)."""
    too_long = long_path(changes)
    if too_long:
        raise ChangeError(too_long)
    return apply_changes(sim_before, changes)


def config_match(delta: Any, sim_before: Any, sim_after: Any) -> bool:
    """CM from where the simulator is: the executor's Δ applied to ŝ gives ŝ' (False when it does not even fit ŝ)."""
    try:
        return canonical_json(apply(decode_delta(delta), sim_before)) == canonical_json(sim_after)
    except DeltaError:
        return False


class _Rollout:
    """One rollout's state: the conversation (for SFT export), the step rows and how it ended."""

    def __init__(self, rid: str, task: RolloutTask) -> None:
        self.rid = rid
        self.task = task
        self.rows: list[dict[str, Any]] = []
        self.messages: list[dict[str, Any]] = []
        self.tools: list[dict[str, Any]] = []  # the tool schemas the agent is given (and the SFT record carries)
        self.status = DONE
        self.reason: str | None = None
        self.sim_state: Any = None

    def stop(self, status: str, reason: str | None) -> None:
        self.status, self.reason = status, reason


class RolloutRunner:
    """Runs rollouts of one simulator with one agent; see the module docstring."""

    def __init__(
        self,
        simulator: Simulator,
        sandbox: Sandbox,
        log: RequestLog,
        agent: AgentSettings | None = None,
        max_steps: int = 12,
        tool_code: ToolCode | None = None,
        progress: Log = lambda _m: None,
    ) -> None:
        self.simulator = simulator
        self.sandbox = sandbox
        self.log = log
        self.agent = agent
        self.agent_name = RECORDED if agent is None else f"agent-{agent.model}"
        self.max_steps = max_steps
        self.concurrency = max(1, simulator.spec.concurrency)
        self.code = tool_code or ToolCode()
        self.progress = progress
        self._client: Any = None
        self._asks_model = kind_of(simulator.spec).asks_model

    @property
    def run_id(self) -> str:
        return run_id(self.simulator.spec.name, self.agent_name)

    # -- the simulator -------------------------------------------------------------------------------
    async def _simulate(self, ro: _Rollout, index: int, sample: dict[str, Any]) -> dict[str, Any]:
        """The simulator's answer for a step: from the request log, or asked now (and logged)."""
        key = prompt_key("simulator", ro.rid, index, messages(sample)) if self._asks_model else None
        if key is not None:
            logged = self.log.get(key)
            if logged is not None:
                return logged
            self.log.asked += 1
        c: Completion = await self.simulator.complete(sample)
        record = asdict(c)  # text, latency_s, prompt and completion tokens, error
        if key is None:  # oracle / no_change: no request, nothing to log
            return record
        if c.error is not None:
            if c.error.startswith("unreachable") and not self.log.entries:
                raise EndpointError(
                    f"{self.simulator.spec.name}: endpoint {self.simulator.spec.base_url} is unreachable ({c.error})"
                )
            return record  # not logged: asked again on a re-run
        return self.log.put(key, {"role": "simulator", "rollout_id": ro.rid, "step_index": index, **record})

    # -- one step ------------------------------------------------------------------------------------
    async def _step(self, ro: _Rollout, index: int, action: Action, real: RealRun) -> str | None:
        """Play one action: the simulator answers from ŝ_k, the executor's step scores it. Returns the
        feedback the agent sees, or None when the rollout stops here."""
        step = real.step(index)
        if step is None:
            ro.stop(SHADOW_ERROR, real.error or f"the executor lost step {index}: {'; '.join(real.issues)[:300]}")
            return None
        sim_before = ro.sim_state
        env = ro.task.env
        code, now = self.code.code(env, step["tool"]), shadow_time(ro.task.key, index)
        sample = simulator_sample(
            f"{ro.rid}#{index}", sim_before, step["tool"], step, code=code, env_id=env.env_id, current_time=now
        )
        answer = await self._simulate(ro, index, sample)
        if answer.get("error") is not None:
            ro.stop(REQUEST_ERROR, f"step {index}: {answer['error']}")
            return None
        drift_before = len(diff(sim_before, real.states[index]))
        row = {
            "rollout_id": ro.rid,
            "task_id": ro.task.task_id,
            "env_id": env.env_id,
            "source": registry.source_of(env),
            "adapter": env.source,
            "step_index": index,
            "turn": action.turn,
            "tool": step["tool"],
            "arguments_json": step["arguments_json"],
            "outcome": step["outcome"],
            "delta_size": int(step["delta_size"]),
            "delta_bucket": AXES["delta"].label_of({"delta_size": int(step["delta_size"])}),
            "real_observation": step["raw_observation"],
            "drift_before": drift_before,
            "diverged_before": drift_before > 0,
            "latency_s": float(answer.get("latency_s") or 0.0),
            "prompt_tokens": answer.get("prompt_tokens"),
            "completion_tokens": answer.get("completion_tokens"),
            "answer": answer.get("text") or "",
            "fm": False,
            "cm": False,
            "state_match": False,
            "drift": None,
            "predicted_changes": None,
            "parse_ok": False,
            "parse_error": None,
            "change_error": None,
            "feedback_json": None,
        }
        ro.rows.append(row)
        parsed = parse_answer(answer.get("text"))
        if not parsed.ok:
            row["parse_error"] = parsed.error
            ro.stop(PARSE_FAILURE, f"step {index}: {parsed.error}")
            return None
        row["parse_ok"] = True
        predicted = parsed.answer or {}
        changes = predicted.get("config_changes", [])
        row["predicted_changes"] = len(changes) if isinstance(changes, list) else None
        row["feedback_json"] = json.dumps(predicted.get("feedback"), ensure_ascii=False, sort_keys=True)
        row["fm"] = feedback_match(predicted.get("feedback"), step["raw_observation"])
        try:
            sim_after = predicted_state(sim_before, changes)
        except ChangeError as exc:
            row["change_error"] = str(exc)
            ro.stop(INVALID_CHANGES, f"step {index}: {exc}")
            return None
        row["cm"] = config_match(step["delta"], sim_before, sim_after)
        row["drift"] = len(diff(sim_after, real.states[index + 1]))
        row["state_match"] = row["drift"] == 0
        ro.sim_state = sim_after
        return feedback_text(predicted.get("feedback"))

    # -- agents --------------------------------------------------------------------------------------
    def _user_turn(self, ro: _Rollout, turn: int) -> None:
        """Append the task's user turn ``turn`` to the conversation (nothing when the task has no such turn)."""
        text = ro.task.turns[turn] if turn < len(ro.task.turns) else None
        if text:
            ro.messages.append({"role": "user", "content": text})

    async def _recorded(self, ro: _Rollout, real: RealRun) -> None:
        actions = ro.task.actions[: self.max_steps]
        turn = -1
        for index, action in enumerate(actions):
            while turn < action.turn:
                turn += 1
                self._user_turn(ro, turn)
            call_id = f"call_{index}"
            call = tool_call(call_id, action.name, json.dumps(action.arguments, ensure_ascii=False))
            ro.messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
            feedback = await self._step(ro, index, action, real)
            if feedback is None:
                return
            ro.messages.append({"role": "tool", "tool_call_id": call_id, "content": feedback})
        if len(ro.task.actions) > self.max_steps:
            ro.stop(STEP_LIMIT, f"cut at {self.max_steps} steps")

    async def _agent_message(self, ro: _Rollout) -> dict[str, Any] | None:
        settings = self.agent
        assert settings is not None
        key = prompt_key("agent", ro.rid, sum(m["role"] == "assistant" for m in ro.messages), ro.messages)
        logged = self.log.get(key)
        if logged is not None:
            return logged["message"]
        if self._client is None:
            self._client = async_client(
                settings.base_url, settings.api_key_env, settings.timeout_s, settings.max_retries
            )
        self.log.asked += 1
        try:
            response = await self._client.chat.completions.create(
                model=settings.model,
                messages=ro.messages,
                tools=ro.tools or None,
                temperature=settings.temperature,
                max_tokens=settings.max_tokens,
            )
        except (openai.AuthenticationError, openai.PermissionDeniedError, openai.NotFoundError) as exc:
            raise EndpointError(f"agent endpoint refused the request: {type(exc).__name__}") from None
        except openai.APIError as exc:
            ro.stop(AGENT_ERROR, f"{type(exc).__name__}: {str(exc)[:200]}")
            return None
        message = response.choices[0].message
        record: dict[str, Any] = {"role": "assistant", "content": message.content}
        if message.tool_calls:
            record["tool_calls"] = [tool_call(c.id, c.function.name, c.function.arguments) for c in message.tool_calls]
        self.log.put(key, {"role": "agent", "rollout_id": ro.rid, "message": record})
        return record

    async def _llm_agent(self, ro: _Rollout) -> None:
        actions: list[Action] = []
        real = RealRun()
        for turn in range(len(ro.task.turns)):
            self._user_turn(ro, turn)
            while True:
                message = await self._agent_message(ro)
                if message is None:
                    return
                ro.messages.append(message)
                calls = message.get("tool_calls") or []
                if not calls:
                    break
                for call in calls:
                    fn = call.get("function") or {}
                    try:
                        args = json.loads(fn.get("arguments") or "{}")
                        if not isinstance(args, dict):
                            raise ValueError("arguments are not a JSON object")
                    except ValueError as exc:
                        error = f"Error: invalid JSON arguments: {exc}"
                        ro.messages.append({"role": "tool", "tool_call_id": call.get("id"), "content": error})
                        continue
                    if len(actions) >= self.max_steps:
                        ro.stop(STEP_LIMIT, f"cut at {self.max_steps} steps")
                        return
                    action = Action(fn.get("name", ""), args, turn)
                    actions.append(action)
                    real = await asyncio.to_thread(
                        shadow_prefix, self.sandbox, ro.rid, ro.task.task_id, ro.task.env, actions
                    )
                    if real.initial is None:
                        ro.stop(SHADOW_ERROR, real.error)
                        return
                    if ro.sim_state is None:
                        ro.sim_state = real.initial
                    feedback = await self._step(ro, len(actions) - 1, action, real)
                    if feedback is None:
                        return
                    ro.messages.append({"role": "tool", "tool_call_id": call.get("id"), "content": feedback})

    # -- a run ---------------------------------------------------------------------------------------
    async def _one(self, task: RolloutTask, real: RealRun | None) -> _Rollout:
        ro = _Rollout(f"{self.run_id}/{task.key}", task)
        ro.messages.append({"role": "system", "content": AGENT_SYSTEM_PROMPT})
        try:
            ro.tools = self.code.tools(task.env)
        except Exception as exc:  # an environment that cannot even be described cannot be run either
            ro.stop(SHADOW_ERROR, f"the environment's tool schemas: {type(exc).__name__}: {str(exc)[:200]}")
            return ro
        if self.agent is not None and not task.turns:
            ro.stop(AGENT_ERROR, f"task {task.task_id} has no user turn to give the agent")
            return ro
        if self.agent is None:
            assert real is not None
            if real.initial is None:
                ro.stop(SHADOW_ERROR, real.error)
                return ro
            ro.sim_state = real.initial  # the simulator starts from the real initial state
            await self._recorded(ro, real)
        else:
            await self._llm_agent(ro)
        return ro

    async def run(
        self, tasks: Sequence[RolloutTask], shadows: dict[str, RealRun] | None = None
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], RolloutReport]:
        """Roll out every task; returns (step rows, rollout rows, report), rows ordered by rollout id and step."""
        started = time.perf_counter()
        if self.agent is None and shadows is None:
            shadows = await asyncio.to_thread(
                shadow_all, self.sandbox, [(t.key, t.task_id, t.env, t.actions[: self.max_steps]) for t in tasks]
            )
        gate = asyncio.Semaphore(self.concurrency)

        async def one(task: RolloutTask) -> _Rollout:
            async with gate:
                ro = await self._one(task, (shadows or {}).get(task.key))
            self.progress(f"{ro.rid}: {ro.status} after {len(ro.rows)} steps")
            return ro

        try:
            done = await asyncio.gather(*(one(t) for t in tasks))
        finally:
            if self._client is not None:
                await self._client.close()
        spec = self.simulator.spec
        report = RolloutReport(self.run_id)
        steps, rollouts = [], []
        for ro in sorted(done, key=lambda r: r.rid):
            common = {
                "run_id": self.run_id,
                "simulator": spec.name,
                "model": spec.model or spec.kind,
                "agent": self.agent_name,
            }
            steps += [{**common, **row} for row in ro.rows]
            rollouts.append({**common, **rollout_summary(ro)})
            report.statuses[ro.status] += 1
            report.parse_failures += sum(not r["parse_ok"] for r in ro.rows)
        report.rollouts, report.steps = len(rollouts), len(steps)
        report.asked, report.reused = self.log.asked, self.log.reused
        report.seconds = time.perf_counter() - started
        return steps, rollouts, report


def rollout_summary(ro: _Rollout) -> dict[str, Any]:
    """Per rollout: status, first divergence, final / max drift, FM / CM rates, verified prefix length, and
    the conversation with the tool schemas the agent was given (what the SFT export writes)."""
    rows = ro.rows
    scored = [r for r in rows if r["drift"] is not None]
    first = next((r["step_index"] for r in scored if r["drift"] > 0), None)
    verified = next((i for i, r in enumerate(rows) if not (r["parse_ok"] and r["fm"] and r["drift"] == 0)), len(rows))
    return {
        "rollout_id": ro.rid,
        "task_id": ro.task.task_id,
        "env_id": ro.task.env.env_id,
        "source": registry.source_of(ro.task.env),
        "adapter": ro.task.env.source,
        "status": ro.status,
        "stop_reason": ro.reason,
        "steps": len(rows),
        "parse_failures": sum(not r["parse_ok"] for r in rows),
        "first_divergence": first,
        "final_drift": scored[-1]["drift"] if scored else None,
        "max_drift": max((r["drift"] for r in scored), default=None),
        "fm_rate": sum(r["fm"] for r in rows) / len(rows) if rows else None,
        "cm_rate": sum(r["cm"] for r in rows) / len(rows) if rows else None,
        "verified_steps": verified,
        "tools_json": json.dumps(ro.tools, ensure_ascii=False, sort_keys=True),
        "messages_json": json.dumps(ro.messages, ensure_ascii=False),
    }


async def simulate(
    tasks: Sequence[RolloutTask],
    simulator: Simulator,
    sandbox: Sandbox,
    log_path: Path,
    agent: AgentSettings | None = None,
    max_steps: int = 12,
    shadows: dict[str, RealRun] | None = None,
    tool_code: ToolCode | None = None,
    progress: Log = lambda _m: None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], RolloutReport]:
    """Roll out ``tasks`` with ``simulator`` (and ``agent``, default: the recorded actions), logging every
    completed request to ``log_path`` (resumable); ``shadows`` are precomputed executor runs by task key
    (recorded actions; computed here when absent)."""
    try:
        with RequestLog(log_path) as log:
            runner = RolloutRunner(simulator, sandbox, log, agent, max_steps, tool_code=tool_code, progress=progress)
            return await runner.run(tasks, shadows)
    finally:
        await simulator.aclose()
