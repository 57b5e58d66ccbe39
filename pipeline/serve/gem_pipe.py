"""``gem.Env`` over a pipe: the environment side of a trainer that runs in another Python (the RL step of
:mod:`pipeline.serve.grpo` runs in ``.venv-train``, where this project's dependencies are not installed).

``python -m pipeline.serve.gem_pipe`` serves the builtin pack's tasks (``--scenarios`` per environment) as
:class:`~pipeline.serve.adapters.GemEnv` instances, one per ``env`` key, over one sandbox session pool. Each stdin
line is a JSON request, answered by one stdout line:

- ``{"op": "reset", "env": K, "seed": S, "task_id": T}`` → ``{"obs", "info"}``
- ``{"op": "step", "env": K, "action": TEXT}`` → ``{"obs", "reward", "terminated", "truncated", "info"}``
- ``{"op": "close", "env": K}`` → ``{"state": the real final state, "initial": the initial state}``

A request that fails is answered ``{"error": "..."}``; end of input ends the process.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from pipeline.envs.registry import sources_config
from pipeline.serve.adapters import GemEnv
from pipeline.serve.episode import Episode
from pipeline.serve.sessions import SessionPool
from pipeline.serve.tasks import ServedTask, load_tasks


class Envs:
    """The pipe's environments by key, each a :class:`GemEnv` on the shared pool."""

    def __init__(self, pool: SessionPool, tasks: list[ServedTask], max_steps: int) -> None:
        self.pool, self.tasks, self.max_steps = pool, tasks, max_steps
        self.envs: dict[str, GemEnv] = {}
        self.initial: dict[str, Any] = {}

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        """The reply to one request (see the module docstring)."""
        op, key = request.get("op"), str(request.get("env", "0"))
        if op == "reset":
            env = self.envs.get(key) or GemEnv(Episode(self.pool, self.tasks, max_steps=self.max_steps))
            self.envs[key] = env
            obs, info = env.reset(seed=request.get("seed"), task_id=request.get("task_id"))
            session = env.episode.session
            self.initial[key] = session.state if session is not None else None
            return {"obs": obs, "info": info}
        env = self.envs.get(key)
        if env is None:
            return {"error": f"no environment {key!r}: reset it first"}
        if op == "step":
            obs, reward, terminated, truncated, info = env.step(request.get("action", ""))
            return {"obs": obs, "reward": reward, "terminated": terminated, "truncated": truncated, "info": info}
        if op == "close":
            session = env.episode.session
            state = session.state if session is not None else None
            env.close()
            return {"state": state, "initial": self.initial.pop(key, None)}
        return {"error": f"unknown op {str(op)[:40]!r}: reset, step or close"}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", type=int, default=1, help="builtin scenarios per environment")
    parser.add_argument("--max-steps", type=int, default=30, help="steps before an episode is truncated")
    args = parser.parse_args(argv)
    tasks = load_tasks(sources_config(builtin={"scenarios_per_env": args.scenarios}, bfcl={"categories": ()}))
    with SessionPool(max_sessions=64) as pool:
        envs = Envs(pool, tasks, args.max_steps)
        for line in sys.stdin:
            try:
                reply = envs.answer(json.loads(line))
            except Exception as exc:  # one bad request is answered, the pipe keeps serving
                reply = {"error": f"{type(exc).__name__}: {exc}"}
            sys.stdout.write(json.dumps(reply, ensure_ascii=False, default=str) + "\n")
            sys.stdout.flush()
        for env in envs.envs.values():
            env.close()


if __name__ == "__main__":
    main()
