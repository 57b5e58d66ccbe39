"""Trajectory collection by an LLM agent through any OpenAI-compatible endpoint (function calling).

The agent is given the environment's tools as OpenAI tool schemas and the task's user turns in order; tool results
come back as ``tool`` messages, parallel calls are executed in order (a step each), and a turn ends when the model
answers without a tool call; an episode is cut at the step limit. What a (weak) model gets wrong is recorded as an
event with its reason and the episode goes on: arguments that are not a JSON object (``malformed_arguments``, not
executed), an unknown tool (``unknown_tool``, an error step), no tool call (``no_tool_call``: stopped, or cut at
``max_tokens``), text that reads like a call the endpoint did not parse (``unparsed_tool_call``, e.g.
LLaMA-Factory's ``Action:`` / ``Action Input:``); a rejected request ends the episode (``model_error``,
:func:`endpoint_reason`).

Each call runs in the sandbox by re-running the episode's actions in a fresh process (environments are
deterministic), so untrusted code never runs here; the message history is recorded, so an episode can be replayed
without the model (:func:`actions_from_messages`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.core.environment import EnvSpec
from pipeline.core.progress import Log, Progress
from pipeline.core.trajectory import Action, Trajectory
from pipeline.envs import registry
from pipeline.execution.sandbox import Sandbox
from pipeline.models.agent_settings import AGENT_SYSTEM_PROMPT, AgentSettings
from pipeline.models.openai_client import async_client, openai
from pipeline.store.jsonl import Appender, read_rows


@dataclass(frozen=True)
class AgentTask:
    task_id: str
    env: EnvSpec
    turns: list[str]  # user messages, in order


@dataclass
class Episode:
    task_id: str
    messages: list[dict[str, Any]]
    events: list[dict[str, Any]] = field(default_factory=list)  # malformed calls, model errors, cut-offs
    status: str = "done"  # done | step_limit | model_error | reset_error


class AgentEndpointError(RuntimeError):
    """The endpoint cannot serve the agent at all (401 / 403 / unknown model / unreachable)."""


#: text a model writes when it means a tool call: LLaMA-Factory's default tool format (``Action:`` /
#: ``Action Input:``), Hermes / Qwen ``<tool_call>`` tags, or a JSON object with ``name`` and ``arguments``
_CALL_LIKE = re.compile(
    r"(?m)^\W*Action:\s*\S+|<tool_call>|\{\s*\"name\"\s*:\s*\"[^\"]*\"\s*,\s*\"(arguments|parameters)\""
)
#: event kinds that are a tool call the model got wrong (the rest: an absent call, endpoint trouble, cut-offs)
INVALID_CALLS = ("malformed_arguments", "unknown_tool", "unparsed_tool_call")
#: what LLaMA-Factory's api answers (HTTP 400) to a conversation that does not alternate user/tool and
#: assistant messages, e.g. the two tool results of a parallel call
_ALTERNATION = ("Only supports u/a/u/a/u", "Invalid role")


def endpoint_reason(exc: openai.APIError) -> str:
    """The recorded reason of a failed agent request: the exception and the endpoint's message, and for
    LLaMA-Factory's alternation rule what it means."""
    reason = f"{type(exc).__name__}: {str(exc)[:200]}"
    if isinstance(exc, openai.BadRequestError) and any(marker in str(exc) for marker in _ALTERNATION):
        reason += (
            " (the endpoint accepts only alternating user/tool and assistant messages, as LLaMA-Factory's api "
            "does: the several tool results of a parallel tool call cannot be sent back to it)"
        )
    return reason


def absent_call(content: str | None, finish_reason: str | None, max_tokens: int) -> dict[str, Any]:
    """The event of an answer without a tool call: ``unparsed_tool_call`` when its text reads like a call the
    endpoint did not parse, else ``no_tool_call`` saying whether the model stopped or was cut at ``max_tokens``."""
    text = content or ""
    if match := _CALL_LIKE.search(text):
        return {
            "kind": "unparsed_tool_call",
            "finish_reason": finish_reason,
            "reason": "the answer reads like a tool call the endpoint did not return as tool_calls "
            f"(its name or input did not parse): {text[match.start() : match.start() + 160]!r}",
        }
    if finish_reason == "length":
        why = f"cut at max_tokens ({max_tokens}) before any tool call"
    elif not text.strip():
        why = "an empty answer"
    else:
        why = "answered in text"
    return {
        "kind": "no_tool_call",
        "finish_reason": finish_reason,
        "reason": f"{why}: the turn ends ({len(text)} characters)",
    }


def tally(row: dict[str, Any]) -> dict[str, int]:
    """Per recorded episode: assistant answers, tool calls executed (``valid``: a known tool with JSON-object
    arguments), invalid calls (:data:`INVALID_CALLS`) and answers without a tool call."""
    kinds = Counter(e["kind"] for e in row["events"])
    calls = sum(len(m.get("tool_calls") or []) for m in row["messages"] if m.get("role") == "assistant")
    return {
        "answers": sum(1 for m in row["messages"] if m.get("role") == "assistant"),
        "tool_calls": calls,
        "valid": calls - kinds["malformed_arguments"] - kinds["unknown_tool"],
        "invalid": sum(kinds[k] for k in INVALID_CALLS),
        "no_tool_call": kinds["no_tool_call"],
    }


def _malformed(kind: str, reason: str, tool: str = "", arguments: str = "") -> dict[str, Any]:
    """A call that was not executed, as the episode's events record it."""
    return {"kind": kind, "tool": tool, "arguments": arguments, "reason": reason}


def actions_from_messages(messages: list[dict[str, Any]]) -> tuple[list[Action], list[dict[str, Any]]]:
    """Re-derive the executed actions from an OpenAI message history (ours or another tool's).

    Returns (actions, malformed calls). A call whose arguments are not a JSON object was not executed.
    """
    actions, malformed = [], []
    turn = -1
    for message in messages:
        if not isinstance(message, dict):
            malformed.append(_malformed("malformed_message", f"message is a {type(message).__name__}, not an object"))
            continue
        role = message.get("role")
        if role == "user":
            turn += 1
        if role != "assistant":
            continue
        calls = message.get("tool_calls") or []
        if not isinstance(calls, list):
            malformed.append(_malformed("malformed_message", f"'tool_calls' is a {type(calls).__name__}, not a list"))
            continue
        for call in calls:
            fn = call.get("function") if isinstance(call, dict) else None
            if (
                not isinstance(fn, dict)
                or not isinstance(fn.get("name"), str)
                or not isinstance(fn.get("arguments") or "{}", str)
            ):
                why = f"not a function call with a string name and string arguments: {repr(call)[:120]}"
                malformed.append(_malformed("malformed_call", why, fn.get("name", "") if isinstance(fn, dict) else ""))
                continue
            name, text = fn["name"], fn.get("arguments") or "{}"
            try:
                args = json.loads(text)
                if not isinstance(args, dict):
                    raise ValueError("arguments are not a JSON object")
            except (ValueError, RecursionError) as exc:
                malformed.append(_malformed("malformed_arguments", str(exc), name, text))
                continue
            actions.append(Action(name, args, max(turn, 0), call=f"{name}({text})"))
    return actions, malformed


class Agent:
    def __init__(self, settings: AgentSettings, sandbox: Sandbox) -> None:
        self.settings = settings
        self.sandbox = sandbox
        self.client = async_client(settings.base_url, settings.api_key_env, settings.timeout_s, settings.max_retries)

    def _observe(self, task: AgentTask, actions: list[Action]) -> tuple[str, dict[str, Any] | None]:
        # the episode's own trajectory id: the frozen clock and seeded ids the agent observes are
        # the ones labeling re-creates for the stored trajectory
        traj = Trajectory(
            f"{task.env.env_id}/{task.task_id}/agent-{self.settings.model}", task.task_id, task.env, tuple(actions)
        )
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
        ep = Episode(task.task_id, messages)
        for turn_index, turn in enumerate(task.turns):
            messages.append({"role": "user", "content": turn})
            while True:
                if len(actions) >= self.settings.step_limit:
                    ep.status = "step_limit"
                    ep.events.append({"kind": "step_limit", "reason": f"cut at {self.settings.step_limit} tool calls"})
                    break
                try:
                    response = await self.client.chat.completions.create(
                        model=self.settings.model,
                        messages=messages,
                        tools=tools,
                        tool_choice="auto",
                        temperature=self.settings.temperature,
                        max_tokens=self.settings.max_tokens,
                    )
                except (openai.AuthenticationError, openai.PermissionDeniedError, openai.NotFoundError) as exc:
                    raise AgentEndpointError(
                        f"agent endpoint refused the request: {type(exc).__name__} ({getattr(exc, 'status_code', '')})"
                    ) from None
                except openai.APIError as exc:
                    ep.status = "model_error"
                    ep.events.append({"kind": "model_error", "reason": endpoint_reason(exc)})
                    break
                if not response.choices:
                    ep.status = "model_error"
                    ep.events.append({"kind": "model_error", "reason": "the endpoint answered with no choices"})
                    break
                choice = response.choices[0]
                message = choice.message
                record = {"role": "assistant", "content": message.content}
                calls = list(message.tool_calls or [])
                if calls:
                    record["tool_calls"] = [
                        {
                            "id": c.id,
                            "type": "function",
                            "function": {"name": c.function.name, "arguments": c.function.arguments},
                        }
                        for c in calls
                    ]
                if getattr(message, "refusal", None):
                    ep.events.append({"kind": "refusal", "reason": message.refusal})
                messages.append(record)
                if not calls:  # the model answered: this turn is over
                    ep.events.append(
                        {
                            **absent_call(message.content, choice.finish_reason, self.settings.max_tokens),
                            "turn": turn_index,
                        }
                    )
                    break
                for call in calls:
                    name, text = call.function.name, call.function.arguments or "{}"
                    try:
                        args = json.loads(text)
                        if not isinstance(args, dict):
                            raise ValueError("arguments are not a JSON object")
                    except ValueError as exc:
                        ep.events.append(_malformed("malformed_arguments", str(exc), name, text))
                        messages.append(
                            {
                                "role": "tool",
                                "tool_call_id": call.id,
                                "content": f"Error: invalid JSON arguments: {exc}",
                            }
                        )
                        continue
                    if name not in names:
                        ep.events.append(
                            {
                                "kind": "unknown_tool",
                                "tool": name,
                                "reason": f"{name!r} is not one of the environment's {len(names)} tools; "
                                "executed as an error step",
                            }
                        )
                    actions.append(Action(name, args, turn_index, call=f"{name}({text})"))
                    observation, problem = await asyncio.to_thread(self._observe, task, actions)
                    if problem is not None:
                        ep.events.append(problem)
                        if problem["kind"] == "reset_error":
                            ep.status = "reset_error"
                            return ep
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": observation})
            if ep.status in ("step_limit", "model_error"):
                break
        return ep


async def collect_agent(
    tasks: list[AgentTask],
    settings: AgentSettings,
    sandbox: Sandbox,
    record: Path,
    log: Log = lambda _m: None,
) -> list[dict[str, Any]]:
    """Run the agent on every task not yet recorded in ``record`` (JSON lines, appended per episode)."""
    done = {row["task_id"]: row for row in read_rows(record)}  # a torn last line from a kill is ignored
    todo = [t for t in tasks if t.task_id not in done]
    if len(todo) < len(tasks):
        log(
            f"agent: {len(tasks) - len(todo)} of {len(tasks)} episodes already recorded in {record.name}; running "
            f"the other {len(todo)}"
        )
    progress = Progress("agent", len(todo), log, unit="episodes")
    agent = Agent(settings, sandbox)
    gate = asyncio.Semaphore(max(1, settings.concurrency))
    try:
        with Appender(record, ensure_ascii=True, default=str) as out:

            async def one(task: AgentTask) -> None:
                async with gate:
                    ep = await agent.episode(task)
                row = {
                    "task_id": task.task_id,
                    "env": dataclasses.asdict(task.env),
                    "status": ep.status,
                    "events": ep.events,
                    "messages": ep.messages,
                    "time": time.time(),
                }
                out.write(row)
                done[task.task_id] = row
                counts = tally(row)
                log(
                    f"agent episode {task.task_id}: {ep.status}, {counts['answers']} answers, "
                    f"{counts['valid']} valid / {counts['invalid']} invalid tool calls, "
                    f"{counts['no_tool_call']} without a tool call"
                )
                progress.advance()

            await asyncio.gather(*(one(t) for t in todo))
    finally:
        await agent.client.close()
    return [done[t.task_id] for t in tasks if t.task_id in done]


def episode_trajectory(row: dict[str, Any], model: str) -> Trajectory:
    """The trajectory of a recorded episode (category and strategy ``agent``): its actions re-derived from the
    recorded messages, which it keeps in ``meta``."""
    actions, _ = actions_from_messages(row["messages"])
    env, task_id = EnvSpec(**row["env"]), row["task_id"]
    meta = {"messages": row["messages"]}
    return Trajectory(f"{env.env_id}/{task_id}/agent-{model}", task_id, env, tuple(actions), "agent", "agent", meta)
