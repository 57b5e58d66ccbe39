"""OpenEnv's own client (``openenv.core.mcp_client.MCPToolClient``) driving a served environment, run in
.venv-openenv (``./forge openenv-env``): ``python -m tests.support.openenv_client URL TASK_ID SESSIONS CALLS_JSON``
runs SESSIONS episodes side by side — reset, list_tools, each call — and prints one JSON line: per episode the tool
names, and per call its reward, error, checks and the observation's metadata keys."""

from __future__ import annotations

import asyncio
import json
import sys

from openenv.core.env_server.mcp_types import CallToolAction, ListToolsAction
from openenv.core.mcp_client import MCPToolClient


async def episode(url: str, task_id: str, seed: int, calls: list) -> dict:
    async with MCPToolClient(base_url=url) as env:
        await env.reset(seed=seed, task_id=task_id)
        tools = await env.step(ListToolsAction())
        steps = [await env.step(CallToolAction(tool_name=name, arguments=args)) for name, args in calls]
    return {
        "tools": [t.name for t in tools.observation.tools],
        "steps": [
            {
                "reward": s.reward,
                "done": s.done,
                "error": None if s.observation.error is None else str(s.observation.error),
                "checks": s.observation.metadata.get("checks"),
                "metadata": sorted(s.observation.metadata),
            }
            for s in steps
        ],
    }


async def main(url: str, task_id: str, sessions: int, calls: list) -> list[dict]:
    return await asyncio.gather(*[episode(url, task_id, seed, calls) for seed in range(sessions)])


if __name__ == "__main__":
    url, task_id, sessions, calls = sys.argv[1], sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4])
    print(json.dumps(asyncio.run(main(url, task_id, sessions, calls))))
