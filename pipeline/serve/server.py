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


def _action(action: Any) -> tuple[str, str | None, Any]:
    """An MCP-shaped action's kind, tool name and arguments (ValueError: not an action)."""
    if not isinstance(action, dict):
        raise ValueError("a step's data is an action object: {'type': 'list_tools'} or {'type': 'call_tool', ...}")
    kind = action.get("type")
    if kind == "list_tools":
        return kind, None, None
    if kind == "call_tool":
        name = action.get("tool_name")
        if not isinstance(name, str):
            raise ValueError("call_tool needs a string 'tool_name'")
        return kind, name, action.get("arguments") or {}
    raise ValueError(f"unknown action type {str(kind)[:60]!r}: list_tools or call_tool")


def _reset_args(data: Any) -> dict[str, Any]:
    data = data if isinstance(data, dict) else {}
    return {k: data.get(k) for k in ("seed", "episode_id", "task_id")}


class _Handlers:
    """The routes' handlers over episodes made by ``make_episode``; blocking episode calls run in worker threads."""

    def __init__(self, make_episode: Callable[[], Episode], task_ids: list[str], max_threads: int) -> None:
        self.make_episode, self.task_ids = make_episode, task_ids
        self.limiter = anyio.CapacityLimiter(max_threads)

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await anyio.to_thread.run_sync(fn, *args, limiter=self.limiter)

    async def step_of(self, episode: Episode, action: Any) -> dict[str, Any]:
        """One action: an executable call is awaited on the event loop (no thread per step); a list of tools is
        answered at once; a simulated mode's call (a blocking request to its simulator) runs in a worker thread."""
        kind, name, arguments = _action(action)
        if kind == "list_tools":
            return episode.list_tools()
        if episode.mode == "exec":
            return await episode.call_tool_async(name, arguments)  # type: ignore[arg-type]
        return await self.run(episode.call_tool, name, arguments)

    async def health(self, _: Request) -> JSONResponse:
        return JSONResponse({"status": "healthy"})

    async def schema(self, _: Request) -> JSONResponse:
        return JSONResponse({"action": ACTION_SCHEMA, "observation": OBSERVATION_SCHEMA, "state": STATE_SCHEMA})

    async def state(self, _: Request) -> JSONResponse:
        return JSONResponse({"episode_id": None, "step_count": 0})

    async def tasks(self, _: Request) -> JSONResponse:
        return JSONResponse({"tasks": self.task_ids})

    async def reset(self, request: Request) -> JSONResponse:
        return await self._stateless(request, with_action=False)

    async def step(self, request: Request) -> JSONResponse:
        return await self._stateless(request, with_action=True)

    async def _stateless(self, request: Request, with_action: bool) -> JSONResponse:
        """``POST /reset`` / ``POST /step``: a fresh episode for the request (reset by its body, then its action)."""
        episode = self.make_episode()
        try:
            raw = await request.body()
            if len(raw) > MAX_MESSAGE_BYTES:
                raise ValueError(f"request body over {MAX_MESSAGE_BYTES} bytes")
            data = json.loads(raw or b"{}")
            if not isinstance(data, dict):
                raise ValueError("the body is a JSON object")
            answer = await self.run(lambda: episode.reset(**_reset_args(data)))
            if with_action:
                answer = await self.step_of(episode, data.get("action"))
            return JSONResponse(answer)
        except CapacityError as exc:
            return JSONResponse({"detail": str(exc)}, status_code=503)
        except (SessionError, ValueError) as exc:
            return JSONResponse({"detail": str(exc)}, status_code=422)
        finally:
            await self.run(episode.close)

    async def ws(self, socket: WebSocket) -> None:
        """``WS /ws``: one session, until ``close``, a disconnect or an oversized message."""
        await socket.accept()
        episode = self.make_episode()
        try:
            while True:
                raw = await socket.receive_text()
                if len(raw.encode("utf-8")) > MAX_MESSAGE_BYTES:
                    await socket.close(code=1009, reason=f"message over {MAX_MESSAGE_BYTES} bytes")
                    return
                reply = await self.answer(episode, raw)
                if reply is None:
                    break
                await socket.send_text(json.dumps(reply, ensure_ascii=False, default=str))
        except WebSocketDisconnect:
            pass
        finally:
            await self.run(episode.close)
            with contextlib.suppress(RuntimeError, WebSocketDisconnect):
                await socket.close()

    async def answer(self, episode: Episode, raw: str) -> dict[str, Any] | None:
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
                return {"type": "observation", "data": await self.run(lambda: episode.reset(**_reset_args(data)))}
            if kind == "step":
                return {"type": "observation", "data": await self.step_of(episode, data)}
            if kind == "state":
                return {"type": "state", "data": await self.run(episode.state)}
            if kind == "close":
                return None
            return _error(f"Unknown message type: {str(kind)[:60]}", "UNKNOWN_TYPE")
        except CapacityError as exc:
            return _error(str(exc), "CAPACITY_REACHED", active_sessions=exc.active, max_sessions=exc.limit)
        except (ValueError, TypeError) as exc:
            return _error(str(exc), "VALIDATION_ERROR")
        except SessionError as exc:
            return _error(str(exc), "EXECUTION_ERROR")


def server_config(app: Starlette, host: str = "127.0.0.1", port: int = 8000, log_level: str = "warning") -> Any:
    """uvicorn's settings for the server: messages up to :data:`MAX_MESSAGE_BYTES`, no lifespan, and no
    per-message deflate (a step's frames are a few hundred bytes of JSON: compressing them costs the server and the
    client more CPU than it saves on a local socket)."""
    import uvicorn

    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        ws_max_size=MAX_MESSAGE_BYTES,
        ws_per_message_deflate=False,
        lifespan="off",
    )


def build_app(make_episode: Callable[[], Episode], task_ids: list[str], max_threads: int = 256) -> Starlette:
    """The server over episodes made by ``make_episode`` (each bound to the shared session pool)."""
    h = _Handlers(make_episode, task_ids, max_threads)
    routes = [
        Route("/health", h.health),
        Route("/schema", h.schema),
        Route("/state", h.state),
        Route("/tasks", h.tasks),
        Route("/reset", h.reset, methods=["POST"]),
        Route("/step", h.step, methods=["POST"]),
        WebSocketRoute("/ws", h.ws),
    ]
    return Starlette(routes=routes)
