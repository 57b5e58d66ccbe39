"""Parent side of the execution sandbox: a pool of worker processes labeling trajectories.

Usage::

    with Sandbox(workers=2, limits=Limits(call_timeout_s=10)) as box:
        for run in box.run(trajectories):   # results in input order
            ...

Each worker is a separate interpreter (``PYTHONHASHSEED=0``, ``TZ=UTC``) that forks one child per
trajectory; see :mod:`pipeline.execution.worker`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from queue import Queue
from typing import Any, Iterable, Iterator

from pipeline.collect.trajectory import Trajectory
from pipeline.envs import blobs, registry
from pipeline.execution.frames import read_frame, write_frame
from pipeline.execution.runner import Limits

_PROJECT_ROOT = Path(__file__).resolve().parents[2]


class SandboxError(RuntimeError):
    """The sandbox itself (not environment code) failed."""


class _Worker:
    def __init__(self) -> None:
        env = dict(os.environ)
        env.update(
            PYTHONHASHSEED="0",
            TZ="UTC",
            PYTHONPATH=os.pathsep.join(filter(None, [str(_PROJECT_ROOT), env.get("PYTHONPATH")])),
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pipeline.execution.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            cwd=str(_PROJECT_ROOT),
        )
        self.sent: set[str] = set()  # blobs this worker already holds
        hello = read_frame(self.proc.stdout)  # type: ignore[arg-type]
        if not hello or hello.get("kind") != "ready":
            self.close()
            raise SandboxError(f"sandbox worker failed to start (exit code {self.proc.poll()})")

    def run(self, trajectory: Trajectory, limits: Limits) -> dict[str, Any]:
        new = {ref: blobs.get(ref) for ref in registry.blob_refs(trajectory.env) if ref not in self.sent}
        write_frame(self.proc.stdin, (trajectory, limits, new))  # type: ignore[arg-type]
        self.sent.update(new)
        reply = read_frame(self.proc.stdout)  # type: ignore[arg-type]
        if reply is None:
            raise SandboxError(f"sandbox worker exited with code {self.proc.wait()}")
        return reply

    def close(self) -> None:
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                if stream:
                    stream.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _not_run(trajectory: Trajectory, reason: object) -> dict[str, Any]:
    """The result of a trajectory the sandbox itself could not run."""
    return {"trajectory_id": trajectory.trajectory_id, "init": None, "init_error": f"SandboxError: {reason}",
            "steps": [], "issues": []}


class Sandbox:
    """A pool of sandbox workers; ``run`` yields one result dict per trajectory, in order."""

    def __init__(self, workers: int = 2, limits: Limits | None = None, window: int = 64) -> None:
        self.workers = max(1, workers)
        self.limits = limits or Limits()
        self.window = max(window, self.workers)
        self._idle: Queue[_Worker | None] = Queue()
        self._all: list[_Worker] = []
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    def __enter__(self) -> "Sandbox":
        self._pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="sandbox")
        for _ in range(self.workers):
            self._idle.put(None)  # started lazily, in the pool threads
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._pool:
            self._pool.shutdown(wait=True, cancel_futures=True)
        for worker in self._all:
            worker.close()
        self._all.clear()

    def _run_one(self, trajectory: Trajectory) -> dict[str, Any]:
        worker = self._idle.get()
        try:
            if worker is None:
                worker = _Worker()
                with self._lock:
                    self._all.append(worker)
            return worker.run(trajectory, self.limits)
        except KeyError as exc:  # a blob the parent does not hold: a catalog problem, not env code
            return _not_run(trajectory, exc.args[0])
        except (SandboxError, OSError, EOFError) as exc:
            # the worker itself died (not the forked child): replace it, report the trajectory
            if worker is not None:
                worker.close()
                with self._lock:
                    if worker in self._all:
                        self._all.remove(worker)
            worker = None
            return _not_run(trajectory, exc)
        finally:
            self._idle.put(worker)

    def run(self, trajectories: Iterable[Trajectory]) -> Iterator[tuple[Trajectory, dict[str, Any]]]:
        if self._pool is None:
            raise SandboxError("use Sandbox as a context manager")
        inflight: deque[tuple[Trajectory, Future[dict[str, Any]]]] = deque()
        for trajectory in trajectories:
            inflight.append((trajectory, self._pool.submit(self._run_one, trajectory)))
            if len(inflight) >= self.window:
                traj, fut = inflight.popleft()
                yield traj, fut.result()
        while inflight:
            traj, fut = inflight.popleft()
            yield traj, fut.result()
