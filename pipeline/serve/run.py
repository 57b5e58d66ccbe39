"""``./forge serve-env``: the tasks of a run config served over the OpenEnv protocol until SIGINT/SIGTERM."""

from __future__ import annotations

import json
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pipeline.evaluate.simulator_spec import Simulator
from pipeline.execution.child import Limits
from pipeline.serve.episode import Episode
from pipeline.serve.server import build_app, server_config
from pipeline.serve.sessions import SessionPool
from pipeline.serve.tasks import ServedTask


class EpisodeLog:
    """Served episodes appended to a JSON-lines file, one whole line per episode written with one ``write`` on
    an ``O_APPEND`` descriptor (a killed server leaves every finished episode, never half of one)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def __call__(self, episode: dict[str, Any]) -> None:
        line = (json.dumps(episode, ensure_ascii=False, default=str, sort_keys=True) + "\n").encode("utf-8")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock, self.path.open("ab", buffering=0) as fh:
            fh.write(line)


def serve(
    tasks: list[ServedTask],
    mode: str = "exec",
    simulator: Simulator | None = None,
    host: str = "127.0.0.1",
    port: int = 8000,
    max_sessions: int = 256,
    idle_timeout_s: float = 900.0,
    limits: Limits | None = None,
    isolation: str = "bwrap",
    episodes: Path | None = None,
    on_ready: Callable[[str], None] = print,
    max_steps: int = 30,
) -> None:
    """Serve until SIGINT/SIGTERM (uvicorn's handlers); every session and sandbox host ends before it returns."""
    import uvicorn

    record = EpisodeLog(episodes) if episodes is not None else None
    with SessionPool(max_sessions, idle_timeout_s, limits, isolation) as pool:

        def make_episode() -> Episode:
            return Episode(pool, tasks, mode, simulator, max_steps=max_steps, record=record)

        app = build_app(make_episode, [t.task_id for t in tasks], max_threads=max_sessions + 8)
        server = uvicorn.Server(server_config(app, host, port))
        original = server.startup

        async def startup(sockets: Any = None) -> None:
            await original(sockets)
            bound = server.servers[0].sockets[0].getsockname()[1] if server.servers else port
            on_ready(f"http://{host}:{bound}")

        def stop(sig: int, frame: Any) -> None:
            """SIGINT/SIGTERM: stop serving, then close every session here (uvicorn's own handler would re-raise the
            signal once it has stopped, ending the process before the sessions are closed)."""
            server.force_exit = server.should_exit and sig == signal.SIGINT
            server.should_exit = True

        server.startup = startup  # type: ignore[method-assign]
        server.handle_exit = stop  # type: ignore[method-assign]
        server.run()
