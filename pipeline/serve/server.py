"""The OpenEnv protocol on an ASGI server (Starlette under uvicorn), with OpenEnv's exact messages.

- ``WS /ws``: one connection is one session (one :class:`~pipeline.serve.episode.Episode`). Client messages
  ``{"type": "reset" | "step" | "state" | "close", "data": {...}}``; answers ``{"type": "observation", "data":
  {"observation", "reward", "done"}}``, ``{"type": "state", "data": {...}}`` or ``{"type": "error", "data":
  {"message", "code"}}`` (OpenEnv's ``WSErrorCode`` names). A step's data is an MCP-shaped action:
  ``{"type": "list_tools"}`` or ``{"type": "call_tool", "tool_name", "arguments"}``; the observation of a call is
  ``{"tool_name", "result", "error", "metadata"}`` (the executor's labels of the step in ``metadata``).
- ``GET /health``, ``GET /schema``, ``GET /state``, ``GET /tasks``; stateless ``POST /reset`` and ``POST /step``
  (each builds a fresh episode: ``/step`` takes ``{"action", "seed", "task_id"}`` and runs that one action).

Bad input never ends the server: malformed JSON, an unknown type, an unknown tool or wrong arguments get an error
message in the session; a message over :data:`MAX_MESSAGE_BYTES` closes that socket with a reason.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from pipeline.serve.episode import Episode
from pipeline.serve.sessions import CapacityError, SessionError

MAX_MESSAGE_BYTES = 1 << 20

ACTION_SCHEMA = {
    "title": "MCPAction",
    "oneOf": [
        {"type": "object", "properties": {"type": {"const": "list_tools"}}, "required": ["type"]},
        {
            "type": "object",
            "properties": {
                "type": {"const": "call_tool"},
                "tool_name": {"type": "string"},
                "arguments": {"type": "object"},
            },
            "required": ["type", "tool_name"],
        },
    ],
}
OBSERVATION_SCHEMA = {
    "title": "CallToolObservation",
    "type": "object",
    "properties": {
        "tool_name": {"type": "string"},
        "result": {},
        "error": {"type": ["object", "null"]},
        "tools": {"type": "array"},
        "done": {"type": "boolean"},
        "reward": {"type": ["number", "null"]},
        "metadata": {"type": "object"},
    },
}
STATE_SCHEMA = {
    "title": "State",
    "type": "object",
    "properties": {"episode_id": {"type": ["string", "null"]}, "step_count": {"type": "integer"}},
}


def _error(message: str, code: str, **extra: Any) -> dict[str, Any]:
    return {"type": "error", "data": {"message": message, "code": code, **extra}}


def _step(episode: Episode, action: Any) -> dict[str, Any]:
    """One MCP-shaped action on an episode (ValueError: not an action)."""
    if not isinstance(action, dict):
        raise ValueError("a step's data is an action object: {'type': 'list_tools'} or {'type': 'call_tool', ...}")
    kind = action.get("type")
    if kind == "list_tools":
        return episode.list_tools()
    if kind == "call_tool":
        name = action.get("tool_name")
        if not isinstance(name, str):
            raise ValueError("call_tool needs a string 'tool_name'")
        return episode.call_tool(name, action.get("arguments") or {})
    raise ValueError(f"unknown action type {str(kind)[:60]!r}: list_tools or call_tool")


def _reset_args(data: Any) -> dict[str, Any]:
    data = data if isinstance(data, dict) else {}
    return {k: data.get(k) for k in ("seed", "episode_id", "task_id")}


def build_app(make_episode: Callable[[], Episode], task_ids: list[str], max_threads: int = 256) -> Starlette:
    """The server over episodes made by ``make_episode`` (each bound to the shared session pool)."""
    limiter = anyio.CapacityLimiter(max_threads)

    async def run(fn: Callable[..., Any], *args: Any) -> Any:
        return await anyio.to_thread.run_sync(fn, *args, limiter=limiter)

    async def health(_: Request) -> JSONResponse:
        return JSONResponse({"status": "healthy"})

    async def schema(_: Request) -> JSONResponse:
        return JSONResponse({"action": ACTION_SCHEMA, "observation": OBSERVATION_SCHEMA, "state": STATE_SCHEMA})

    async def state(_: Request) -> JSONResponse:
        return JSONResponse({"episode_id": None, "step_count": 0})

    async def tasks(_: Request) -> JSONResponse:
        return JSONResponse({"tasks": task_ids})

    async def _body(request: Request) -> dict[str, Any]:
        raw = await request.body()
        if len(raw) > MAX_MESSAGE_BYTES:
            raise ValueError(f"request body over {MAX_MESSAGE_BYTES} bytes")
        data = json.loads(raw or b"{}")
        if not isinstance(data, dict):
            raise ValueError("the body is a JSON object")
        return data

    async def reset(request: Request) -> JSONResponse:
        episode = make_episode()
        try:
            data = await _body(request)
            return JSONResponse(await run(lambda: episode.reset(**_reset_args(data))))
        except CapacityError as exc:
            return JSONResponse({"detail": str(exc)}, status_code=503)
        except (SessionError, ValueError) as exc:
            return JSONResponse({"detail": str(exc)}, status_code=422)
        finally:
            await run(episode.close)

    async def step(request: Request) -> JSONResponse:
        episode = make_episode()
        try:
            data = await _body(request)
            await run(lambda: episode.reset(**_reset_args(data)))
            return JSONResponse(await run(_step, episode, data.get("action")))
        except CapacityError as exc:
            return JSONResponse({"detail": str(exc)}, status_code=503)
        except (SessionError, ValueError) as exc:
            return JSONResponse({"detail": str(exc)}, status_code=422)
        finally:
            await run(episode.close)

    async def ws(socket: WebSocket) -> None:
        await socket.accept()
        episode = make_episode()
        try:
            while True:
                raw = await socket.receive_text()
                if len(raw.encode("utf-8")) > MAX_MESSAGE_BYTES:
                    await socket.close(code=1009, reason=f"message over {MAX_MESSAGE_BYTES} bytes")
                    return
                reply = await _answer(episode, raw)
                if reply is None:
                    break
                await socket.send_text(json.dumps(reply, ensure_ascii=False, default=str))
        except WebSocketDisconnect:
            pass
        finally:
            await run(episode.close)
            with contextlib.suppress(RuntimeError, WebSocketDisconnect):
                await socket.close()

    async def _answer(episode: Episode, raw: str) -> dict[str, Any] | None:
        """The reply to one client message (None: ``close``)."""
        try:
            message = json.loads(raw)
        except json.JSONDecodeError as exc:
            return _error(f"Invalid JSON: {exc}", "INVALID_JSON")
        if not isinstance(message, dict):
            return _error("a message is a JSON object with a 'type'", "VALIDATION_ERROR")
        kind, data = message.get("type"), message.get("data")
        try:
            if kind == "reset":
                return {"type": "observation", "data": await run(lambda: episode.reset(**_reset_args(data)))}
            if kind == "step":
                return {"type": "observation", "data": await run(_step, episode, data)}
            if kind == "state":
                return {"type": "state", "data": await run(episode.state)}
            if kind == "close":
                return None
            return _error(f"Unknown message type: {str(kind)[:60]}", "UNKNOWN_TYPE")
        except CapacityError as exc:
            return _error(str(exc), "CAPACITY_REACHED", active_sessions=exc.active, max_sessions=exc.limit)
        except ValueError as exc:
            return _error(str(exc), "VALIDATION_ERROR")
        except SessionError as exc:
            return _error(str(exc), "EXECUTION_ERROR")

    routes = [
        Route("/health", health),
        Route("/schema", schema),
        Route("/state", state),
        Route("/tasks", tasks),
        Route("/reset", reset, methods=["POST"]),
        Route("/step", step, methods=["POST"]),
        WebSocketRoute("/ws", ws),
    ]
    return Starlette(routes=routes)
