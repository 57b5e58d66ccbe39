"""``./forge serve-env``: every task served to agent-RL trainers over the OpenEnv protocol; ``./forge
bench-env-server``: that server's steps/s."""

from __future__ import annotations

import argparse
import os
import sys

from cli.base import ROOT, become, child_env, command, data_root, say, say_problems, wants_help


def _serve_env_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="./forge serve-env",
        description=(
            "Serve every task of the run config's sources (the default: the builtin pack and bfcl) to agent-RL "
            "trainers over the OpenEnv protocol (WS /ws sessions, /health, /schema, /state, POST /reset and /step; "
            "docs/rl.md), each session a live sandboxed environment; served episodes are appended to "
            "DATA_ROOT/served/episodes.jsonl. Stops on Ctrl-C / SIGTERM."
        ),
    )
    p.add_argument("-c", "--config", action="append", default=[], metavar="FILE", help="run config YAML (repeatable)")
    p.add_argument("--mode", choices=("exec", "sim", "shadow"), default="exec", help="who answers (default: exec)")
    p.add_argument(
        "--simulator",
        default=None,
        help="sim/shadow: oracle, no_change, or a JSON simulator spec as simulator_eval's `simulators` items "
        '(\'{"name": "m", "kind": "openai", "model": "...", "base_url": "..."}\')',
    )
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000, help="port (0: any free one; the URL is printed)")
    p.add_argument("--max-sessions", type=int, default=256, help="live sessions at most (more: CAPACITY_REACHED)")
    p.add_argument("--idle-timeout", type=float, default=900.0, help="seconds before an idle session is closed")
    p.add_argument("--max-steps", type=int, default=30, help="tool calls per episode (then done: true)")
    return p


@command("[-c FILE] [--mode exec|sim|shadow] [--port N]   serve every task to agent-RL trainers (OpenEnv)")
def serve_env(argv: list[str]) -> int:
    """``./forge serve-env``: :func:`pipeline.serve.run.serve` over the run config's tasks."""
    args = _serve_env_parser().parse_args(argv)
    import json as _json

    from cli.launch import load_run_config
    from pipeline.core.settings import settings as current_settings
    from pipeline.evaluate.simulators import make_simulator, simulator_spec
    from pipeline.serve.run import serve
    from pipeline.serve.tasks import load_tasks
    from pipeline.store.layout import DataLayout
    from resources.environments import EnvironmentSourcesResource

    run_config, problems = load_run_config(args.config)
    if say_problems(problems):
        return 2
    simulator = None
    if args.mode != "exec":
        if not args.simulator:
            say(f"--mode {args.mode} needs --simulator (oracle, no_change, or a JSON simulator spec)", sys.stderr)
            return 2
        spec = _json.loads(args.simulator) if args.simulator.lstrip().startswith("{") else {"name": args.simulator}
        spec.setdefault("kind", spec["name"])
        simulator = make_simulator(simulator_spec(**spec))
    resources = run_config.get("resources") or {}
    sources = (resources.get("sources") or {}).get("config") or {}
    root = data_root(((resources.get("store") or {}).get("config") or {}).get("data_root"))
    cfg = EnvironmentSourcesResource(**sources).config(DataLayout.at(root))
    tasks = load_tasks(cfg)
    checked = sum(1 for t in tasks if t.checks)

    def ready(url: str) -> None:
        ws = url.replace("http", "ws", 1)
        say(f"serving {len(tasks)} tasks ({checked} with executable checks) at {url} (WebSocket {ws}/ws)")
        say(f"mode {args.mode}; served episodes are appended to {root / 'served' / 'episodes.jsonl'}")
        say("stop it with Ctrl-C (or SIGTERM)")

    serve(
        tasks,
        args.mode,
        simulator,
        args.host,
        args.port,
        args.max_sessions,
        args.idle_timeout,
        isolation=current_settings().sandbox,
        episodes=root / "served" / "episodes.jsonl",
        on_ready=ready,
        max_steps=args.max_steps,
    )
    say("stopped: every session and sandbox process ended")
    return 0


@command("[--sessions N ...] [--calls N]   steps/s through the serve-env WebSocket server vs labeling")
def bench_env_server(argv: list[str]) -> int:
    """``./forge bench-env-server``: benchmarks/bench_env_server.py with the arguments as given."""
    env = dict(os.environ) if wants_help(argv) else child_env()
    return become([sys.executable, str(ROOT / "benchmarks" / "bench_env_server.py"), *argv], env)
