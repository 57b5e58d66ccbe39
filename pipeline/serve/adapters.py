"""In-process adapters over :class:`~pipeline.serve.episode.Episode`, for trainers that hold environments in their
own process: a ``gem.Env`` (GEM, ROLL, RAGEN: ``reset(seed) -> (obs, info)``, ``step(action) -> (obs, reward,
terminated, truncated, info)``), and a TRL ``environment_factory`` class whose public methods are the task's tools.

``gem-llm``'s ``Env`` is not subclassed (the package pulls a training stack); :class:`GemEnv` has its exact
signatures. An action is a dict ``{"name", "arguments"}`` (or ``{"tool_name", "arguments"}``), or text holding one
call: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` (Hermes / Qwen), a bare JSON object of that
shape, or a call string ``tool(a=1, b="x")`` with keyword arguments.
"""

from __future__ import annotations

import json
import re
from contextlib import suppress
from typing import Any

from pipeline.envs.callparse import CallParseError, parse_call
from pipeline.rollouts.loop import feedback_text
from pipeline.serve.episode import Episode, mcp_tools
from pipeline.serve.sessions import SessionError

_TAGGED = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.S)


class ActionParseError(ValueError):
    """Text or a dict that holds no tool call."""


def parse_action(action: Any) -> tuple[str, dict[str, Any]]:
    """(tool, arguments) of an action (see the module docstring); :class:`ActionParseError` saying why not."""
    if isinstance(action, str):
        text = action.strip()
        tagged = _TAGGED.search(text)
        body = tagged.group(1) if tagged else text
        if body.startswith("{"):
            try:
                action = json.loads(body)
            except json.JSONDecodeError as exc:
                raise ActionParseError(f"the tool call is not valid JSON ({exc.msg})") from None
        else:
            try:
                call = parse_call(body)
            except CallParseError as exc:
                raise ActionParseError(f"no tool call in the text: {exc}") from None
            if call.args:
                raise ActionParseError("a call string takes keyword arguments only")
            return call.name, call.kwargs
    if not isinstance(action, dict):
        raise ActionParseError(f"an action is a dict or a text, not {type(action).__name__}")
    name = action.get("name", action.get("tool_name"))
    arguments = action.get("arguments", action.get("parameters", {}))
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments or "{}")
        except json.JSONDecodeError as exc:
            raise ActionParseError(f"the arguments are not valid JSON ({exc.msg})") from None
    if not isinstance(name, str) or not isinstance(arguments, dict):
        raise ActionParseError("a tool call needs a string 'name' and an 'arguments' object")
    return name, arguments


class GemEnv:
    """A served task as a ``gem.Env``. ``reset(seed, task_id=None)``: the observation is the task text, ``info``
    holds the tools (OpenAI schemas), task id and mode. ``step``: the call's observation text; ``reward`` is the
    checks' mean on the real state (0.0 while a task has no checks, with ``info["reward"]`` None and a note, as
    a gem reward is a float); ``terminated`` when the session ends, ``truncated`` at the step limit. An action that
    is no tool call answers with an error observation and changes nothing."""

    def __init__(self, episode: Episode) -> None:
        self.episode = episode

    def reset(self, seed: int | None = None, task_id: str | None = None, **_: Any) -> tuple[str, dict[str, Any]]:
        answer = self.episode.reset(seed=seed, task_id=task_id)
        task = self.episode.task
        assert task is not None
        info = {"tools": list(task.tools), "task_id": task.task_id, **answer["observation"]["metadata"]}
        return task.text, info

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        try:
            name, arguments = parse_action(action)
        except ActionParseError as exc:
            return f"Error: {exc}", float(self.episode.reward or 0.0), False, False, {"parse_error": str(exc)}
        answer = self.episode.call_tool(name, arguments)
        obs = answer["observation"]
        text = f"Error: {obs['error']['message']}" if obs.get("error") else feedback_text(obs["result"])
        info = {**obs.get("metadata", {}), "reward": answer["reward"]}
        ended = self.episode.session is None or self.episode.session.closed is not None
        truncated = answer["done"] and not ended
        return text, float(answer["reward"] or 0.0), bool(answer["done"] and ended), truncated, info

    def close(self) -> None:
        self.episode.close()


class ToolEnvironment:
    """TRL's ``environment_factory`` form: ``reset(**row)`` starts the row's task (``task_id``, ``seed``) and returns
    its text; the task's tools are bound as public methods (TRL reads their names, docstrings and ``__signature__``-less
    keyword arguments from the schemas in :attr:`tools`); :meth:`get_reward` is the checks' mean on the real state."""

    def __init__(self, episode: Episode) -> None:
        self._episode = episode
        self.tools: list[dict[str, Any]] = []

    def reset(self, **row: Any) -> str:
        answer = self._episode.reset(seed=row.get("seed"), task_id=row.get("task_id"))
        task = self._episode.task
        assert task is not None
        self.tools = list(task.tools)
        for tool in mcp_tools(task):
            setattr(self, tool["name"], self._bound(tool["name"], tool["description"]))
        return str(answer["observation"]["task"])

    def _bound(self, name: str, description: str) -> Any:
        def call(**arguments: Any) -> str:
            answer = self._episode.call_tool(name, arguments)
            obs = answer["observation"]
            if obs.get("error"):
                raise ValueError(obs["error"]["message"])
            return feedback_text(obs["result"])

        call.__name__ = name
        call.__doc__ = description
        return call

    def get_reward(self) -> float | None:
        return self._episode.reward

    def close(self) -> None:
        with suppress(SessionError):
            self._episode.close()
