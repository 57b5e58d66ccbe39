"""Serving throughput: steps/s through the OpenEnv WebSocket server at 1, 16 and 64 concurrent sessions, beside the
sandbox's labeling rate on the same environments and calls.

Each session is one client connection that plays ``--episodes`` episodes in a row, as a trainer's environment worker
does (reset, then ``--calls`` tool calls: its environment's tools that take no required argument, cycling), then
closes; its tasks are drawn by session and episode number, so 64 sessions cover every environment. The server runs in
this process (uvicorn in a thread, the sessions' hosts under the configured sandbox isolation); the clients run in a
process of their own, as a trainer's would (one asyncio loop, as OpenEnv's own client). Printed: steps/s, p50 / p99
step latency, p50 reset latency, the machine's busy CPU per step (every process and the kernel: the clients, the
server, the sandbox; each episode's start counted in) and how it splits between the clients, the server's process
and the sandbox's processes (the session hosts and their children), private memory of the sandbox processes per live
session; the private memory with ``--live`` sessions open at once; then the labeling rate of the
same trajectories through ``Sandbox.run`` (the pipeline's labeling path) with its CPU per step (its parent's and its
sandbox's), and the serving rate
at the most sessions as % of it. Each rate is the fastest of ``--repeat`` runs (the others are the same work slowed
by whatever else the machine did); at the most sessions, serving and labeling runs alternate, so both are measured
over the same minutes, and each pair's share is printed too.

    python benchmarks/bench_env_server.py [--sessions 1 16 64] [--calls N] [--episodes N] [--client-processes N]
                                          [--workers N] [--live N] [--repeat R]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import statistics
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="./forge bench-env-server", description=" ".join((__doc__ or "").split("\n\n")[0].split())
    )
    parser.add_argument("--sessions", type=int, nargs="+", default=[1, 16, 64])
    parser.add_argument("--calls", type=int, default=20, help="tool calls per episode")
    parser.add_argument("--episodes", type=int, default=1, help="episodes each session plays in a row")
    parser.add_argument(
        "--client-processes", type=int, default=1, help="client processes the sessions are spread over (one loop each)"
    )
    parser.add_argument("--workers", type=int, default=2, help="labeling sandbox workers (the comparison)")
    parser.add_argument(
        "--reuses", type=int, help="sessions one child of the builtin pack serves (1: a fork each; default: the pool's)"
    )
    parser.add_argument("--live", type=int, default=256, help="sessions held open at once for the memory figure")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each measurement; the fastest is reported")
    return parser


ARGS = _parser().parse_args() if __name__ == "__main__" else None  # -h answers before the heavy imports

import uvicorn  # noqa: E402
from websockets.asyncio.client import connect  # noqa: E402

from pipeline.core.settings import settings  # noqa: E402
from pipeline.core.trajectory import Action, Trajectory  # noqa: E402
from pipeline.envs import blobs  # noqa: E402
from pipeline.envs.registry import sources_config  # noqa: E402
from pipeline.execution.sandbox import Sandbox  # noqa: E402
from pipeline.serve.episode import Episode, mcp_tools  # noqa: E402
from pipeline.serve.server import build_app, server_config  # noqa: E402
from pipeline.serve.sessions import SessionPool  # noqa: E402
from pipeline.serve.tasks import ServedTask, load_tasks  # noqa: E402


def _calls(task: ServedTask, count: int) -> list[tuple[str, dict]]:
    """``count`` calls of the task's tools that take no required argument, cycling (reads, mostly)."""
    free = [t["name"] for t in mcp_tools(task) if not t["input_schema"].get("required")]
    return [(free[i % len(free)], {}) for i in range(count)] if free else []


def _private_mb(pids: set[int]) -> float:
    """Private (unshared) resident memory of ``pids`` and their descendants, MiB (from /proc smaps_rollup)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as fh:
                for line in fh:
                    if line.startswith(("Private_Clean", "Private_Dirty")):
                        total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


def _busy_seconds() -> float:
    """CPU seconds the whole machine spent busy so far (``/proc/stat``: every CPU, every process, the kernel)."""
    with open("/proc/stat") as fh:
        user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, fh.readline().split()[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pids: set[int]) -> float:
    """CPU seconds of ``pids`` so far, each with its reaped children's (``/proc/PID/stat``: utime, stime, cutime,
    cstime): summed over the same process tree at two moments, the difference is what the tree spent between them,
    processes that ended meanwhile included (their parent reaped them)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(f) for f in fields[11:15])
    return total / os.sysconf("SC_CLK_TCK")


class _Split:
    """The CPU seconds this process (the server, or labeling's parent) and its sandbox processes (every descendant
    but the clients) spent from :meth:`start` to :meth:`stop`."""

    def start(self, clients: set[int] = frozenset()) -> None:
        self.clients = set(clients)
        self.own, self.sandbox = _own_seconds(), _cpu_seconds(_descendants(os.getpid()) - self.clients)

    def stop(self) -> tuple[float, float]:
        return _own_seconds() - self.own, _cpu_seconds(_descendants(os.getpid()) - self.clients) - self.sandbox


def _own_seconds() -> float:
    times = os.times()
    return times.user + times.system


def _descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat") as fh:
                    ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = set(), [root]
    while todo:
        pid = todo.pop()
        for child in children.get(pid, []):
            out.add(child)
            todo.append(child)
    return out


async def _session(url: str, episodes: list, lat: list, resets: list, done: Any, measured: Any) -> None:
    """One client session: each episode (reset, its calls) in turn, then (once every session got this far and the
    memory was read) close."""
    async with connect(url + "/ws", max_size=1 << 22) as ws:
        for task_id, calls in episodes:
            t0 = time.perf_counter()
            await ws.send(json.dumps({"type": "reset", "data": {"task_id": task_id}}))
            reply = json.loads(await ws.recv())
            resets.append(time.perf_counter() - t0)
            assert reply["type"] == "observation", reply
            for name, args in calls:
                t0 = time.perf_counter()
                step = {"type": "call_tool", "tool_name": name, "arguments": args}
                await ws.send(json.dumps({"type": "step", "data": step}))
                reply = json.loads(await ws.recv())
                lat.append(time.perf_counter() - t0)
                assert reply["type"] == "observation", reply
        done()
        await measured.wait()
        await ws.send(json.dumps({"type": "close"}))


def _clients(url: str, plan: list[list[tuple[str, list]]], ready: Any, go: Any, out: Any, measured: Any) -> None:
    """A client process: every session of ``plan`` on one asyncio loop, as OpenEnv's own client runs them
    (``websockets.asyncio``). Says ``ready`` once imported and starts at ``go``; puts (step latencies, reset latencies,
    the process's own CPU seconds) on ``out`` once every session is done with its calls, then closes them once
    ``measured`` is set."""

    async def run() -> None:
        lat: list[float] = []
        resets: list[float] = []
        left, all_done, release = [len(plan)], asyncio.Event(), asyncio.Event()

        def done() -> None:
            left[0] -= 1
            if not left[0]:
                all_done.set()

        own = time.process_time()
        tasks = [asyncio.create_task(_session(url, episodes, lat, resets, done, release)) for episodes in plan]
        await all_done.wait()
        out.put((lat, resets, time.process_time() - own))
        await asyncio.to_thread(measured.wait)
        release.set()
        await asyncio.gather(*tasks)

    ready.release()
    go.wait()
    asyncio.run(run())


def _play(
    url: str, plan: list[list[tuple[str, list]]], while_live: Any, processes: int = 1
) -> tuple[float, list, list, tuple[float, float], Any]:
    """``plan``'s sessions from ``processes`` client processes (spawned: nothing of this process is shared; session
    ``i`` in process ``i % processes``), all started at once; ``while_live()`` runs while they are all open. Returns
    the seconds from the start to the last call, step and reset latencies, (the machine's busy CPU seconds meanwhile,
    the clients'), and what ``while_live`` returned."""
    context = multiprocessing.get_context("spawn")
    ready, go, out, measured = context.Semaphore(0), context.Event(), context.Queue(), context.Event()
    shares = [plan[k::processes] for k in range(processes) if plan[k::processes]]
    clients = [context.Process(target=_clients, args=(url, share, ready, go, out, measured)) for share in shares]
    for process in clients:
        process.start()
    try:
        for _ in clients:
            if not ready.acquire(timeout=600):
                raise RuntimeError("a client process did not start")
        split = _Split()
        split.start({process.pid for process in clients if process.pid is not None})
        t0, busy = time.perf_counter(), _busy_seconds()
        go.set()
        answers = [out.get(timeout=1800) for _ in clients]
        elapsed, busy = time.perf_counter() - t0, _busy_seconds() - busy
        server, sandbox = split.stop()
        seen = while_live()
    finally:
        go.set()
        measured.set()
        for process in clients:
            process.join(600)
    if any(process.exitcode != 0 for process in clients):
        raise RuntimeError(f"a client process failed (exits {[p.exitcode for p in clients]})")
    lat = [x for answer in answers for x in answer[0]]
    resets = [x for answer in answers for x in answer[1]]
    return elapsed, lat, resets, (busy, sum(answer[2] for answer in answers), server, sandbox), seen


def _hosts_mb(pool: SessionPool) -> float:
    return _private_mb({p for h in pool._hosts.values() for p in (h.proc.pid, *_descendants(h.proc.pid))})


def _plan(args: Any, tasks: list[ServedTask], sessions: int) -> list[list[tuple[str, list]]]:
    """Each session's episodes: (task id, calls), the task drawn by session and episode number."""
    return [
        [
            (task.task_id, _calls(task, args.calls))
            for task in (tasks[((i + e * sessions) * 7) % len(tasks)] for e in range(max(1, args.episodes)))
        ]
        for i in range(sessions)
    ]


def _labeler(args: Any, tasks: list[ServedTask], box: Sandbox) -> Any:
    """A function that labels the most sessions' episodes (the same tasks and calls) through ``Sandbox.run`` once:
    (steps/s, the machine's CPU ms per step, this process's, the sandbox's); the environments are started first (as
    the server's hosts are)."""
    env_of = {t.task_id: t.env for t in tasks}
    trajectories = [
        Trajectory(f"bench/{i}/{e}", task_id, env_of[task_id], tuple(Action(n, a, k) for k, (n, a) in enumerate(calls)))
        for i, episodes in enumerate(_plan(args, tasks, max(args.sessions)))
        for e, (task_id, calls) in enumerate(episodes)
    ]
    list(box.run(list({t.env.env_id: t for t in trajectories}.values())))  # warm

    def label() -> tuple[float, float, float, float]:
        split = _Split()
        split.start()
        t0, busy = time.perf_counter(), _busy_seconds()
        steps = sum(len(r["steps"]) for _, r in box.run(trajectories))
        rate, busy = steps / (time.perf_counter() - t0), _busy_seconds() - busy
        parent, sandbox = split.stop()
        return rate, busy * 1e3 / steps, parent * 1e3 / steps, sandbox * 1e3 / steps

    return label


def _reuses(args: Any) -> dict[str, int]:
    return {"reuses": args.reuses} if args.reuses else {}


def _measure(args: Any, tasks: list[ServedTask], isolation: str) -> tuple[list[tuple], tuple[float, float], list]:
    """Each session count's fastest run through the WebSocket server: (sessions, steps/s, p50 and p99 step ms,
    p50 reset ms, the machine's CPU ms per step, private MiB per live session); the fastest labeling run; and each
    (serving, labeling) pair at the most sessions, run one after the other."""
    rows, pairs = [], []
    with (
        SessionPool(max_sessions=max(args.sessions) + 8, isolation=isolation, **_reuses(args)) as pool,
        Sandbox(workers=args.workers, isolation=isolation) as box,
    ):
        label = _labeler(args, tasks, box)
        app = build_app(lambda: Episode(pool, tasks), [t.task_id for t in tasks], max_threads=max(args.sessions) + 8)
        server = uvicorn.Server(server_config(app, port=0, log_level="error"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        while not server.started:
            time.sleep(0.05)
        url = f"ws://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
        warm = {t.env.env_id: t for t in tasks}.values()  # every session host started (not timed)
        _play(url, [[(t.task_id, _calls(t, 2))] for t in warm], lambda: None)
        for n in args.sessions:
            runs = []
            for _ in range(max(1, args.repeat)):
                plan = _plan(args, tasks, n)
                elapsed, lat, resets, busy, mem = _play(url, plan, lambda: _hosts_mb(pool), args.client_processes)
                q = statistics.quantiles(lat, n=100) if len(lat) > 1 else [lat[0]] * 99
                reset = statistics.median(resets) * 1e3
                # the kernel counts CPU time in ticks (10 ms): a run busy for less than 0.2 s reads as noise
                cpu = tuple(seconds * 1e3 / len(lat) for seconds in busy) if busy[0] >= 0.2 else None
                runs.append((n, len(lat) / elapsed, q[49] * 1e3, q[98] * 1e3, reset, cpu, mem / n))
                if n == max(args.sessions):
                    pairs.append((runs[-1][1], label()))
            rows.append(max(runs, key=lambda row: row[1]))
        server.should_exit = True
        thread.join(10)
    return rows, max(labeled for _, labeled in pairs), pairs


def _as_corpus(task: ServedTask) -> ServedTask:
    """The task with its environment's class code as a corpus would bring it (one comment line more): code that is
    not the project's own, so it is served untrusted, a session host (a sandbox instance) per environment."""
    options = task.env.options
    code = blobs.get(options["code_ref"]) + "\n# a corpus's copy of this class\n"
    return replace(task, env=replace(task.env, options={**options, "code_ref": blobs.put(code)}))


def _live_memory(args: Any, tasks: list[ServedTask], isolation: str) -> None:
    """``--live`` sessions held open at once: the private memory of the sandbox processes."""
    with SessionPool(max_sessions=args.live + 8, isolation=isolation) as pool:
        pool.open(tasks[0].env, "bench/live/warm").close()
        t0 = time.perf_counter()
        live = [pool.open(tasks[i % len(tasks)].env, f"bench/live/{i}") for i in range(args.live)]
        opened = time.perf_counter() - t0
        held = sum(s.closed is None for s in live)
        live_mb = _hosts_mb(pool)
    print(
        f"{held} of {args.live} sessions live at once (opened in {opened:.1f} s): {live_mb:.0f} MiB of private memory "
        f"in the sandbox processes, {live_mb / max(1, held):.2f} MiB per session"
    )


def main() -> None:
    args = ARGS or _parser().parse_args()
    builtin = list(load_tasks(sources_config(builtin={"scenarios_per_env": 7}, bfcl={"categories": ()})))
    isolation = settings().sandbox
    print(
        f"{len(builtin)} builtin tasks, {args.calls} calls per session, sandbox {isolation}, {os.cpu_count()} CPUs, "
        f"the fastest of {max(1, args.repeat)} runs"
    )
    print(
        "| tasks | sessions | steps/s | p50 step ms | p99 step ms | p50 reset ms | CPU ms per step (machine) "
        "| the clients' | the server's | the sandbox's | private MiB per live session |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    shares = []
    for name, tasks in (("builtin pack", builtin), ("untrusted corpus", [_as_corpus(t) for t in builtin])):
        rows, labeled, pairs = _measure(args, tasks, isolation)
        for n, rate, p50, p99, reset, cpu, mem in rows:
            print(
                f"| {name} | {n} | {rate:.0f} | {p50:.1f} | {p99:.1f} | {reset:.0f} | "
                + (" | ".join(f"{ms:.2f}" for ms in cpu) if cpu else "– | – | – | –")
                + f" | {mem:.1f} |",
                flush=True,
            )
        shares.append((name, rows[-1], labeled, pairs))
    for name, (n, served, *_, cpu, _mem), (labeling, machine, parent, sandbox), pairs in shares:
        each = ", ".join(f"{100 * s / lab[0]:.0f}%" for s, lab in pairs)
        split = (
            f" ({cpu[0]:.2f} CPU ms per step: the clients' {cpu[1]:.2f}, the server's {cpu[2]:.2f}, the sandbox's "
            f"{cpu[3]:.2f})"
            if cpu
            else ""
        )
        print(
            f"{name}: labeling the same trajectories (Sandbox.run, {args.workers} workers) {labeling:.0f} steps/s "
            f"({machine:.2f} CPU ms per step: its parent's {parent:.2f}, the sandbox's {sandbox:.2f}); serving at {n} "
            f"sessions {served:.0f} steps/s{split} = {100 * served / labeling:.0f}% of labeling (each pair: {each})"
        )
    if args.live:
        _live_memory(args, builtin, isolation)


if __name__ == "__main__":
    main()
