"""Labeling throughput and the cost of isolation.

Two workloads: ground-truth replay of all 800 bfcl multi-turn tasks (4,625 steps), and explored
trajectories of the builtin pack (EnvScaler-format code, exec'd). For each it prints steps/s and
peak memory for:
  * in-process: execute + labels (canonical state, Δ, hashes, outcome) in this process under the frozen
                clock, no isolation (the reference ceiling);
  * sandbox:    the pipeline's labeling stage executing every call (bwrap workers, a forked child per
                trajectory under seccomp, Landlock and limits, JSON frames, labels in the parent, Parquet parts);
  * untrusted:  the builtin pack's trajectories as a corpus's code (one sandbox instance per environment, a
                fresh child per trajectory), as % of in-process; and one instance's start time in ms.
And one more: **heavy environment** — exploration of a corpus whose module defines pydantic models
(tests/support/schema_corpus: the classes its zygote creates once), calls/s in the sandbox (goal ≥ 300 on 2 CPUs).

    python benchmarks/bench_labeling.py [--workers N ...] [--repeat K] [--pack-calls N] [--heavy-episodes N]
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.core.settings import prepare_process

prepare_process()  # as the entry points do, before pyarrow loads (Arrow's jemalloc pool)

from dataclasses import replace  # noqa: E402

from pipeline.collect.collector import collect  # noqa: E402
from pipeline.collect.explore import ExploreSettings  # noqa: E402
from pipeline.collect.run import collect_all  # noqa: E402
from pipeline.collect.sources import env_items  # noqa: E402
from pipeline.core.trajectory import Trajectory  # noqa: E402
from pipeline.envs import blobs, envscaler, registry  # noqa: E402
from pipeline.envs.bfcl_replay import ground_truth_trajectories  # noqa: E402
from pipeline.envs.bfcl_tasks import default_task_files, iter_tasks  # noqa: E402
from pipeline.envs.catalog import build_catalog  # noqa: E402
from pipeline.envs.registry import sources_config  # noqa: E402
from pipeline.execution.child import Limits, execute  # noqa: E402
from pipeline.execution.freeze import frozen  # noqa: E402
from pipeline.execution.labels import TrajectoryLabels  # noqa: E402
from pipeline.execution.policy import PolicySettings  # noqa: E402
from pipeline.execution.sandbox import Sandbox, _Worker  # noqa: E402
from pipeline.labeling.steps import label  # noqa: E402
from pipeline.store.layout import DataLayout  # noqa: E402
from pipeline.store.trajectories import iter_trajectories  # noqa: E402
from tests.support import schema_corpus  # noqa: E402

#: the heavy-environment row's goal: explored calls/s in the sandbox on 2 CPUs
HEAVY_GOAL = 300


def peak_mb(who: int) -> float:
    return resource.getrusage(who).ru_maxrss / 1024


def in_process(trajectories: list) -> tuple[int, float]:
    """Execute and label in this process, no isolation: the same runner, frozen clock and labels as the
    sandbox (the reference ceiling)."""
    steps = 0
    t0 = time.perf_counter()
    for traj in trajectories:
        labels = TrajectoryLabels(traj, Limits().max_observation_chars)
        with frozen(traj.trajectory_id, traj.seed, traj.clock_start):
            execute(traj, labels.feed, Limits())
        steps += len(labels.result["steps"])
    return steps, time.perf_counter() - t0


def sandboxed(workers: int) -> tuple[int, float, float]:
    with tempfile.TemporaryDirectory() as tmp, Sandbox(workers=workers) as box:
        layout = DataLayout.at(tmp)
        t0 = time.perf_counter()
        collect(ground_truth_trajectories(iter_tasks(default_task_files())), layout, box)
        t1 = time.perf_counter()
        layout.collected_steps.unlink()  # measure the sandbox executing every call (not the kept labels)
        report = label(layout, box)
        return report.steps, time.perf_counter() - t1, t1 - t0


def pack(workers: list[int], calls: int, repeat: int) -> None:
    """Explore the builtin pack once, then label the same trajectories in-process and sandboxed."""
    with tempfile.TemporaryDirectory() as tmp:
        _pack(tmp, workers, calls, repeat)


def _pack(tmp: str, workers: list[int], calls: int, repeat: int) -> None:
    with Sandbox(workers=max(workers)) as box:
        layout = DataLayout.at(tmp)
        cfg = sources_config(bfcl={"replay": False})
        items, issues = env_items(cfg)
        build_catalog(layout, items, issues)
        t0 = time.perf_counter()
        collect_all(cfg, layout, box, ExploreSettings(call_budget=calls, cell_factor=1e9, group_factor=1e9))
        explore_secs = time.perf_counter() - t0
        trajectories = list(iter_trajectories(layout))
        steps = sum(len(t.actions) for t in trajectories)
        print(
            f"builtin pack: {len(trajectories)} explored trajectories, {steps} steps "
            f"(exploration in the sandbox: {steps / explore_secs:7.0f} steps/s)"
        )
        best = min((in_process(trajectories) for _ in range(repeat)), key=lambda r: r[1])
        print(f"  in-process labeling   : {best[0] / best[1]:7.0f} steps/s")
    for n in workers:
        secs = []
        for _ in range(repeat):
            with Sandbox(workers=n) as box:
                for part in layout.steps_dir.glob("part-*"):
                    part.unlink()
                layout.collected_steps.unlink(missing_ok=True)  # every call executed in the sandbox
                t0 = time.perf_counter()
                report = label(layout, box)
                secs.append(time.perf_counter() - t0)
        print(
            f"  sandbox, {n} worker(s) : {report.steps / min(secs):7.0f} steps/s "
            f"(in-process is {best[0] / best[1] / (report.steps / min(secs)):.1f}x faster)"
        )
    untrusted(trajectories, max(workers), repeat, best[0] / best[1])


def corpus_copy(trajectory: Trajectory) -> Trajectory:
    """The trajectory with its class code as a corpus would bring it (one comment line more): code that is not
    the project's own, so the sandbox runs it untrusted — an instance per environment, a fresh child per
    trajectory."""
    options = trajectory.env.options
    code = blobs.get(options["code_ref"]) + "\n# a corpus's copy of this class\n"
    return replace(trajectory, env=replace(trajectory.env, options={**options, "code_ref": blobs.put(code)}))


def untrusted(trajectories: list, workers: int, repeat: int, builtin_rate: float = 0.0, starts: int = 5) -> None:
    """The untrusted mode: the builtin pack's explored trajectories as a corpus's code, labeled
    in-process and in the sandbox (one instance per environment, a fresh child per trajectory); and the start of
    one instance (bwrap, the worker ready to serve) in ms."""
    corpus = [corpus_copy(t) for t in trajectories]
    assert all(registry.reuse_key(t.env) is None for t in corpus)
    best = min((in_process(corpus) for _ in range(repeat)), key=lambda r: r[1])
    # the conservative reference: the faster of in-process on the corpus copies and on the builtin pack itself
    reference = max(best[0] / best[1], builtin_rate)
    rates, instances = [], 0
    for _ in range(repeat):
        with Sandbox(workers=workers) as box:
            t0 = time.perf_counter()
            steps = sum(len(result["steps"]) for _, result in box.run(corpus))
            rates.append(steps / (time.perf_counter() - t0))
            instances = box.instances_started
    envs = len({t.env.env_id for t in corpus})
    print(
        f"untrusted corpus ({envs} environments, {instances} instances, {workers} worker(s), a fresh child per "
        f"trajectory): {max(rates):7.0f} steps/s = {max(rates) / reference:.0%} of in-process ({reference:.0f} steps/s)"
    )
    source = corpus[0].env.source
    times = []
    for _ in range(starts):
        t0 = time.perf_counter()
        worker = _Worker(Sandbox().isolation, Limits(), source)
        times.append(time.perf_counter() - t0)
        worker.kill()
    times.sort()
    print(f"one sandbox instance starts in {times[len(times) // 2] * 1000:.0f} ms (median of {starts}; bwrap to ready)")


def heavy(workers: int, episodes: int, repeat: int) -> None:
    """Exploration of a corpus with pydantic models (one environment, ``episodes`` live episodes of 12 calls over 8
    scenarios): calls/s in the sandbox, the untrusted mode (its instance's zygote creates the classes once, each
    episode's child is forked after it), against in-process (each reset runs the module body)."""
    items, rows = schema_corpus.corpus(8)
    item = envscaler.parse_env_item("telecom", items["telecom"])
    trajectories = [
        Trajectory(
            trajectory_id=f"{item.qualified_id}/{row['task_id']}/explore-e{e}",
            task_id=row["task_id"],
            env=item.spec(row["init_config"]),
            actions=(),
            strategy="explore",
            meta={"explore": PolicySettings(seed=e)},
        )
        for e in range(episodes)
        for row in [rows[e % len(rows)]]
    ]
    steps, secs = min((in_process(trajectories) for _ in range(repeat)), key=lambda r: r[1])
    rates, per_cpu = [], []
    for _ in range(repeat):
        for isolation in ("bwrap", "trusted"):
            cpu0, t0 = cpu_seconds(), time.perf_counter()
            with Sandbox(workers=workers, isolation=isolation) as box:
                calls = sum(len(result["steps"]) for _, result in box.run(trajectories))
            if isolation == "bwrap":
                rates.append(calls / (time.perf_counter() - t0))
            else:  # its workers are this process's children: their CPU time (and their children's) is counted
                per_cpu.append(calls / (cpu_seconds() - cpu0))
    verdict = "meets" if max(rates) >= HEAVY_GOAL else "misses"
    print(
        f"heavy environment (pydantic models, {episodes} episodes, {workers} worker(s), a fresh child per episode): "
        f"{max(rates):7.0f} calls/s explored in the sandbox ({verdict} the goal of {HEAVY_GOAL}; in-process "
        f"{steps / secs:.0f} calls/s; {max(per_cpu):.0f} calls per CPU-second of the parent and every sandbox "
        f"process, trusted isolation; load average {os.getloadavg()[0]:.1f})"
    )


def cpu_seconds() -> float:
    """CPU time of this process and of its children that ended (user + system)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join((__doc__ or "").split("\n\n")[0].split()))
    parser.add_argument("--workers", type=int, nargs="*", default=[1, os.cpu_count() or 1])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--pack-calls", type=int, default=10_000)
    parser.add_argument("--heavy-episodes", type=int, default=200)
    parser.add_argument("--heavy-only", action="store_true", help="only the heavy-environment row")
    args = parser.parse_args()
    if args.heavy_only:
        heavy(max(args.workers), args.heavy_episodes, args.repeat)
        return
    trajectories = list(ground_truth_trajectories(iter_tasks(default_task_files())))
    print(f"{len(trajectories)} trajectories, {os.cpu_count()} CPUs, Python {sys.version.split()[0]}")
    best = min((in_process(trajectories) for _ in range(args.repeat)), key=lambda r: r[1])
    print(
        f"in-process replay+label : {best[0]} steps in {best[1]:.2f}s = {best[0] / best[1]:7.0f} steps/s "
        f"(peak RSS {peak_mb(resource.RUSAGE_SELF):.0f} MiB)"
    )
    for workers in args.workers:
        runs = [sandboxed(workers) for _ in range(args.repeat)]
        steps, secs, collect_secs = min(runs, key=lambda r: r[1])
        print(
            f"sandbox labeling, {workers} worker(s): {steps} steps in {secs:.2f}s = {steps / secs:7.0f} steps/s "
            f"(collection {collect_secs:.2f}s; peak RSS parent {peak_mb(resource.RUSAGE_SELF):.0f} MiB, "
            f"largest worker/child {peak_mb(resource.RUSAGE_CHILDREN):.0f} MiB)"
        )
    if args.pack_calls:
        pack(args.workers, args.pack_calls, args.repeat)
    if args.heavy_episodes:
        heavy(max(args.workers), args.heavy_episodes, args.repeat)


if __name__ == "__main__":
    main()
