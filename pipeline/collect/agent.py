"""Trajectory collection by an LLM agent through any OpenAI-compatible endpoint (function calling).

The agent sees the environment's tools as OpenAI tool schemas and the task (for multi-turn tasks,
each user turn in order); tool results come back as ``tool`` messages; an episode ends cleanly when the
model answers without a tool call, or is cut at the step limit. Parallel tool calls are executed in
order, each a step. Every tool call is executed in the sandbox by re-running the episode's actions so
far in a fresh process (environments are deterministic; model latency dominates), so untrusted code
never runs in this process. The full message history is recorded with the trajectory, so it can be
replayed without the model (:func:`actions_from_messages`).
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import openai

from pipeline.core.fields import setting
from pipeline.core.openai_client import async_client
from pipeline.core.trajectory import Action, Trajectory
from pipeline.envs import registry
from pipeline.core.environment import EnvSpec
from pipeline.execution.sandbox import Sandbox
from pipeline.store.jsonl import Appender, read_rows

AGENT_SYSTEM_PROMPT = ("You are a careful assistant that completes the user's task by calling the available tools. "
                       "Call tools when they help; answer without a tool call when the task is done.")


@dataclass(frozen=True)
class AgentSettings:
    """An LLM agent solving tasks by function calling through an OpenAI-compatible endpoint."""

    model: str = setting("", "Model name; empty = the agent policy is skipped.")
    base_url: str | None = setting(None, "OpenAI-compatible endpoint (OpenAI, vLLM, LLaMA-Factory API).")
    api_key_env: str = setting("OPENAI_API_KEY", "Environment variable holding the API key.")
    temperature: float = setting(0.0, "Sampling temperature.")
    max_tokens: int = setting(1024, "Most tokens per model answer.")
    concurrency: int = setting(4, "Tasks run concurrently.")
    step_limit: int = setting(12, "Tool calls per episode before it is cut.")
    timeout_s: float = setting(120.0, "Timeout of one model request, seconds.")
    max_retries: int = setting(4, "Retries of a model request (429 / 5xx / timeouts / connection errors).")


@dataclass(frozen=True)
class AgentTask:
    task_id: str
    env: EnvSpec
    turns: list[str]  # user messages, in order


@dataclass
class Episode:
    task_id: str
    trajectory: Trajectory | None
    messages: list[dict[str, Any]]
    events: list[dict[str, Any]] = field(default_factory=list)  # malformed calls, model errors, cut-offs
    status: str = "done"  # done | step_limit | model_error | reset_error


class AgentEndpointError(RuntimeError):
    """The endpoint cannot serve the agent at all (401 / 403 / unknown model / unreachable)."""


def actions_from_messages(messages: list[dict[str, Any]]) -> tuple[list[Action], list[dict[str, Any]]]:
    """Re-derive the executed actions from an OpenAI message history (ours or another tool's).

    Returns (actions, malformed calls). A call whose arguments are not a JSON object was not executed.
    """
    actions, malformed = [], []
    turn = -1
    for message in messages:
        if not isinstance(message, dict):
            malformed.append({"kind": "malformed_message", "tool": "", "arguments": "", "reason": f"message is a {type(message).__name__}, not an object"})
            continue
        role = message.get("role")
        if role == "user":
            turn += 1
        if role != "assistant":
            continue
        calls = message.get("tool_calls") or []
        if not isinstance(calls, list):
            malformed.append({"kind": "malformed_message", "tool": "", "arguments": "", "reason": f"'tool_calls' is a {type(calls).__name__}, not a list"})
            continue
        for call in calls:
            fn = call.get("function") if isinstance(call, dict) else None
            if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not isinstance(fn.get("arguments") or "{}", str):
                malformed.append({"kind": "malformed_call", "tool": fn.get("name", "") if isinstance(fn, dict) else "",
                                  "arguments": "", "reason": f"not a function call with a string name and string arguments: {repr(call)[:120]}"})
                continue
            name, text = fn["name"], fn.get("arguments") or "{}"
            try:
                args = json.loads(text)
                if not isinstance(args, dict):
                    raise ValueError("arguments are not a JSON object")
            except (ValueError, RecursionError) as exc:
                malformed.append({"kind": "malformed_arguments", "tool": name, "arguments": text, "reason": str(exc)})
                continue
            actions.append(Action(name, args, max(turn, 0), call=f"{name}({text})"))
    return actions, malformed


class Agent:
    def __init__(self, settings: AgentSettings, sandbox: Sandbox) -> None:
        self.settings = settings
        self.sandbox = sandbox
        self.client = async_client(settings.base_url, settings.api_key_env, settings.timeout_s, settings.max_retries)

    async def aclose(self) -> None:
        await self.client.close()

    def _observe(self, task: AgentTask, actions: list[Action]) -> tuple[str, dict[str, Any] | None]:
        # the episode's own trajectory id: the frozen clock and seeded ids the agent observes are
        # the ones labeling re-creates for the stored trajectory
        traj = Trajectory(f"{task.env.env_id}/{task.task_id}/agent-{self.settings.model}", task.task_id, task.env, tuple(actions))
        [(_, result)] = list(self.sandbox.run([traj]))
        if result["init"] is None:
            return "", {"kind": "reset_error", "reason": result["init_error"]}
        step = next((s for s in result["steps"] if s["step_index"] == len(actions) - 1), None)
        if step is None:
            return "Error: the call could not be executed", {"kind": "lost_call", "reason": "; ".join(result["issues"])}
        return step["raw_observation"], None

    async def episode(self, task: AgentTask) -> Episode:
        tools = registry.tool_schemas(task.env)
        names = {t["function"]["name"] for t in tools}
        messages: list[dict[str, Any]] = [{"role": "system", "content": AGENT_SYSTEM_PROMPT}]
        actions: list[Action] = []
        ep = Episode(task.task_id, None, messages)
        for turn_index, turn in enumerate(task.turns):
            messages.append({"role": "user", "content": turn})
            while True:
                if len(actions) >= self.settings.step_limit:
                    ep.status = "step_limit"
                    ep.events.append({"kind": "step_limit", "reason": f"cut at {self.settings.step_limit} tool calls"})
                    break
                try:
                    response = await self.client.chat.completions.create(
                        model=self.settings.model, messages=messages, tools=tools, tool_choice="auto",
                        temperature=self.settings.temperature, max_tokens=self.settings.max_tokens,
                    )
                except (openai.AuthenticationError, openai.PermissionDeniedError, openai.NotFoundError) as exc:
                    raise AgentEndpointError(f"agent endpoint refused the request: {type(exc).__name__} ({getattr(exc, 'status_code', '')})") from None
                except openai.APIError as exc:
                    ep.status = "model_error"
                    ep.events.append({"kind": "model_error", "reason": f"{type(exc).__name__}: {str(exc)[:200]}"})
                    break
                message = response.choices[0].message
                record = {"role": "assistant", "content": message.content}
                calls = list(message.tool_calls or [])
                if calls:
                    record["tool_calls"] = [{"id": c.id, "type": "function",
                                             "function": {"name": c.function.name, "arguments": c.function.arguments}} for c in calls]
                if getattr(message, "refusal", None):
                    ep.events.append({"kind": "refusal", "reason": message.refusal})
                messages.append(record)
                if not calls:
                    break  # the model answered: this turn is over
                for call in calls:
                    name, text = call.function.name, call.function.arguments or "{}"
                    try:
                        args = json.loads(text)
                        if not isinstance(args, dict):
                            raise ValueError("arguments are not a JSON object")
                    except ValueError as exc:
                        ep.events.append({"kind": "malformed_arguments", "tool": name, "arguments": text, "reason": str(exc)})
                        messages.append({"role": "tool", "tool_call_id": call.id, "content": f"Error: invalid JSON arguments: {exc}"})
                        continue
                    if name not in names:
                        ep.events.append({"kind": "unknown_tool", "tool": name})
                    actions.append(Action(name, args, turn_index, call=f"{name}({text})"))
                    observation, problem = await asyncio.to_thread(self._observe, task, actions)
                    if problem is not None:
                        ep.events.append(problem)
                        if problem["kind"] == "reset_error":
                            ep.status = "reset_error"
                            ep.trajectory = None
                            return ep
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": observation})
            if ep.status in ("step_limit", "model_error"):
                break
        ep.trajectory = Trajectory(
            trajectory_id=f"{task.env.env_id}/{task.task_id}/agent-{self.settings.model}",
            task_id=task.task_id, env=task.env, actions=tuple(actions), category="agent", strategy="agent",
            meta={"messages": messages},
        )
        return ep


def load_episodes(path: Path) -> dict[str, dict[str, Any]]:
    """Finished episodes recorded so far (a torn last line from a kill is ignored)."""
    return {row["task_id"]: row for row in read_rows(path)}


async def collect_agent(
    tasks: list[AgentTask], settings: AgentSettings, sandbox: Sandbox, record: Path,
    log: Callable[[str], None] = lambda _m: None,
) -> list[dict[str, Any]]:
    """Run the agent on every task not yet recorded in ``record`` (JSON lines, appended per episode)."""
    done = load_episodes(record)
    todo = [t for t in tasks if t.task_id not in done]
    agent = Agent(settings, sandbox)
    gate = asyncio.Semaphore(max(1, settings.concurrency))
    try:
        with Appender(record, ensure_ascii=True, default=str) as out:
            async def one(task: AgentTask) -> None:
                async with gate:
                    ep = await agent.episode(task)
                row = {"task_id": task.task_id, "env": {"source": task.env.source, "env_id": task.env.env_id,
                                                         "init_config": task.env.init_config, "options": task.env.options},
                       "status": ep.status, "events": ep.events, "messages": ep.messages, "time": time.time()}
                out.write(row)
                done[task.task_id] = row
                log(f"agent episode {task.task_id}: {ep.status}, {sum(1 for m in ep.messages if m['role'] == 'tool')} tool results")

            await asyncio.gather(*(one(t) for t in todo))
    finally:
        await agent.aclose()
    return [done[t.task_id] for t in tasks if t.task_id in done]


def episode_trajectory(row: dict[str, Any], model: str) -> Trajectory:
    """The trajectory (actions re-derived from the recorded messages) of a recorded episode."""
    env = EnvSpec(**row["env"])
    actions, _ = actions_from_messages(row["messages"])
    return Trajectory(
        trajectory_id=f"{env.env_id}/{row['task_id']}/agent-{model}", task_id=row["task_id"], env=env,
        actions=tuple(actions), category="agent", strategy="agent", meta={"messages": row["messages"]},
    )
