"""Parent side of the execution sandbox: a pool of isolated worker processes running trajectories.

Usage::

    with Sandbox(workers=2, limits=Limits(call_timeout_s=10)) as box:
        for trajectory, result in box.run(trajectories):   # results in input order
            ...

Trusted code runs on shared workers, untrusted code on one instance per environment. Everything a worker sends
is untrusted: size-capped frames, read with a deadline and tagged with their trajectory; the labels are computed
here. A worker that stops answering, dies or breaks the protocol is killed and replaced; the call it was running
becomes an ``error`` step and the trajectory is truncated there.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import signal
import subprocess
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from itertools import islice
from queue import Queue
from typing import Any

from pipeline.core.trajectory import Trajectory
from pipeline.envs import blobs, registry
from pipeline.execution.child import Limits, describe_exit
from pipeline.execution.frames import FdReader, FrameError, FrameTimeout, encode
from pipeline.execution.isolation import SandboxUnavailable, checked_isolation, kernel_memory_note, worker_command
from pipeline.execution.labels import TrajectoryLabels, empty_result
from pipeline.execution.wire import limits_to_wire, max_frame, trajectory_to_wire

__all__ = ["Limits", "Sandbox", "SandboxError", "SandboxUnavailable"]

log = logging.getLogger(__name__)

START_TIMEOUT_S = 60.0
STDERR_KEEP = 16 << 10  # the last bytes of a worker's stderr kept for error messages
GRACE_S = 10.0  # beyond the per-call limit, before a silent worker counts as stopped


class SandboxError(RuntimeError):
    """The sandbox itself (not environment code) failed."""


class _WorkerLost(Exception):
    """The worker is unusable after this trajectory (its partial result is attached)."""

    def __init__(self, result: dict[str, Any]) -> None:
        super().__init__("worker lost")
        self.result = result


class _Worker:
    def __init__(self, isolation: str, limits: Limits, preload: str | None = None) -> None:
        launch = worker_command(isolation, limits.tmp_mb, preload)
        self.uid = launch.uid  # under root: the host uid of its own it runs as (released once it has ended)
        try:
            self.proc = subprocess.Popen(
                launch.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=launch.env,
                cwd=launch.cwd,
                pass_fds=launch.pass_fds,
                start_new_session=True,
            )
        except BaseException:
            self._release()
            raise
        finally:
            launch.close()
        self._stderr = bytearray()
        self._drain = threading.Thread(target=self._drain_stderr, name="sandbox-stderr", daemon=True)
        self._drain.start()
        self.landlock = 0  # the Landlock ABI the worker's children are confined with (0: none)
        self.reader = FdReader(self.proc.stdout.fileno(), max_frame(limits))  # type: ignore[union-attr]
        self.sent: set[str] = set()  # blobs this worker already holds
        # requests are written by their own thread: the next trajectories are queued while this side reads
        self._outbox: Queue[bytes | None] = Queue()
        self._writer = threading.Thread(target=self._write_requests, name="sandbox-requests", daemon=True)
        self._writer.start()
        try:
            hello = self.reader.next(START_TIMEOUT_S)
        except FrameError as exc:
            hello = None
            reason = str(exc)
        else:
            reason = f"exit code {self.proc.poll()}"
        if not hello or hello.get("kind") != "ready":
            self.kill()
            tail = self.stderr_tail()
            raise SandboxUnavailable(
                f"sandbox worker ({isolation}) failed to start ({reason})" + (f": {tail}" if tail else "")
            )
        abi = hello.get("landlock")
        self.landlock = abi if isinstance(abi, int) and not isinstance(abi, bool) and 0 <= abi < 1000 else 0

    def _drain_stderr(self) -> None:
        """Read the worker's stderr until EOF, keeping only the last STDERR_KEEP bytes."""
        stream = self.proc.stderr
        with contextlib.suppress(OSError, ValueError):
            while chunk := stream.read1(1 << 16):  # type: ignore[union-attr]
                self._stderr += chunk
                if len(self._stderr) > STDERR_KEEP:
                    del self._stderr[: len(self._stderr) - STDERR_KEEP]

    def stderr_tail(self, limit: int = 2000) -> str:
        self._drain.join(timeout=2)  # a dead worker's last words (its stderr is at EOF)
        return bytes(self._stderr[-limit:]).decode("utf-8", "replace").strip()

    def _write_requests(self) -> None:
        while (data := self._outbox.get()) is not None:
            try:
                self.proc.stdin.write(data)  # type: ignore[union-attr]
                self.proc.stdin.flush()  # type: ignore[union-attr]
            except (OSError, ValueError):
                return  # the worker is gone: the reading side finds out and replaces it

    def send(self, trajectory: Trajectory, limits: Limits) -> None:
        """Queue a trajectory (raises KeyError for a code blob the parent does not hold)."""
        new = {ref: blobs.get(ref) for ref in registry.blob_refs(trajectory.env) if ref not in self.sent}
        request = {
            "kind": "run",
            "trajectory": trajectory_to_wire(trajectory),
            "limits": limits_to_wire(limits),
            "blobs": new,
        }
        self._outbox.put(encode(request))
        self.sent.update(new)

    def receive(self, trajectory: Trajectory, limits: Limits) -> dict[str, Any]:
        """Read the frames of a sent trajectory, in the order the trajectories were sent."""
        labels = TrajectoryLabels(trajectory, limits.max_observation_chars)
        max_steps = max(len(trajectory.actions), int(getattr(trajectory.meta.get("explore"), "episode_length", 0) or 0))
        timeout = limits.call_timeout_s + GRACE_S
        while True:
            try:
                msg = self.reader.next(timeout)
            except FrameTimeout:
                self._lose(
                    labels,
                    "Timeout",
                    f"the sandbox worker sent nothing for {timeout:g}s (stopped or wedged); worker killed and replaced",
                )
            except FrameError as exc:
                self._lose(
                    labels,
                    "UntrustedData",
                    f"the sandbox worker broke the protocol ({exc}); worker killed and replaced",
                )
            if msg is None:
                code = self.proc.wait()
                self._lose(labels, "WorkerCrash", f"the sandbox worker died ({describe_exit(code)}); worker replaced")
            if msg.get("trajectory_id") != trajectory.trajectory_id:
                self._lose(
                    labels,
                    "UntrustedData",
                    f"the sandbox worker sent a {str(msg.get('kind'))[:40]!r} frame that is not tagged "
                    "with this trajectory; worker killed and replaced",
                )
            kind = msg.get("kind")
            if kind == "end":  # (tagged with this trajectory: checked above)
                return labels.result
            if kind == "tick":
                continue
            labels.feed(msg)
            if len(labels.result["steps"]) > max_steps:
                labels.result["steps"] = labels.result["steps"][:max_steps]
                self._lose(
                    labels,
                    "UntrustedData",
                    "the sandbox worker sent more steps than the trajectory has; worker killed and replaced",
                )

    def _lose(self, labels: TrajectoryLabels, error_type: str, message: str) -> None:
        """Kill the worker (the one that died: harmless), label what it was running lost, raise."""
        self.kill()
        if labels.result["init"] is None:
            labels.result["init_error"] = labels.result["init_error"] or f"{error_type}: {message}"
        else:
            index = labels.next_index()
            labels.lost(index, error_type, message)
            labels.result["issues"].append(f"trajectory truncated: {error_type}: {message}")
        raise _WorkerLost(labels.result)

    def kill(self, grace: float = 0.0) -> None:
        """End the worker: its input closed, ``grace`` seconds to end by itself, then its process group (bwrap:
        its whole PID namespace) killed."""
        self._outbox.put(None)
        self._writer.join(timeout=5)
        for stream in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                if stream:
                    stream.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=grace)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        if self.proc.stderr is not None:
            self._drain.join(timeout=5)
            with contextlib.suppress(OSError):
                self.proc.stderr.close()
        self._release()

    def _release(self) -> None:
        """Hand its uid back once none of its processes is left (the namespace's last ones end just after bwrap)."""
        if self.uid is not None:
            _wait_gone({self.uid.uid})
            self.uid.release()
            self.uid = None


def uid_processes(uids: set[int]) -> list[int]:
    """The processes of the machine whose real uid is one of ``uids`` (read from ``/proc``, from outside)."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/status", "rb") as fh:
                    status = fh.read()
            except OSError:
                continue
            line = status[status.find(b"\nUid:") + 5 :].split(b"\n", 1)[0].split()
            if line and int(line[0]) in uids:
                found.append(int(entry.name))
    return found


def _wait_gone(uids: set[int], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while uid_processes(uids) and time.monotonic() < deadline:
        time.sleep(0.005)


def _instance_key(trajectory: Trajectory) -> tuple[str, ...]:
    """The environment a sandbox instance is for: its adapter, id and code."""
    env = trajectory.env
    return (env.source, env.env_id, str(env.options.get("code_ref")))


def _not_run(trajectory: Trajectory, reason: object) -> dict[str, Any]:
    """The result of a trajectory the sandbox itself could not run."""
    return empty_result(trajectory.trajectory_id, f"SandboxError: {reason}")


class Sandbox:
    """A pool of sandbox workers; ``run`` yields one result dict per trajectory, in order.

    ``isolation``: ``bwrap`` (default) or ``trusted`` (no namespace boundary; only for code you trust). The first
    worker starts on entry (a sandbox that cannot start is an error at once, never a silent fallback); with
    ``lazy``, at the first ``run``/``submit`` instead."""

    batch = 4  # consecutive trajectories queued on one worker at once (fresh children)
    max_batch = 16  # trajectories of one reuse key queued on one worker at once
    min_lane = 16  # an environment's trajectories in one window per extra instance of it running beside the first

    def __init__(
        self, workers: int = 2, limits: Limits | None = None, isolation: str = "bwrap", lazy: bool = False
    ) -> None:
        self.workers = max(1, workers)
        self.lazy = lazy
        self._started = False
        self._starting = threading.Lock()
        self.limits = limits or Limits()
        self.window = max(256, self.workers)
        self.isolation = checked_isolation(isolation)
        self._idle: Queue[_Worker | None] = Queue()
        self._all: list[_Worker] = []
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self.workers_replaced = 0
        #: sandbox instances started for one environment's untrusted code (:meth:`_run_instance`)
        self.instances_started = 0
        #: idle instances kept for their environment's later trajectories (≈ 22 MB each; a restart costs ≈ 0.2 s)
        self.max_live = max(64, 8 * self.workers)
        self._busy: set[tuple[str, ...]] = set()  # environments whose instance is running a batch
        self._turns = threading.Condition()
        self._live: OrderedDict[tuple[str, ...], _Worker] = OrderedDict()  # idle instances, by environment
        #: whether the kernel confines children's writes (Landlock)
        self.landlock = False
        #: how children's writes are confined, for run summaries
        self.confinement = ""

    def __enter__(self) -> Sandbox:
        if not self.lazy:
            self._start()
        _OPEN.add(self)
        self._pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="sandbox")
        return self

    def _start(self) -> None:
        """Start the first worker, once (raises SandboxUnavailable with the reason), and say how children's
        writes are confined; the other workers start lazily, in the pool threads."""
        with self._starting:  # held until the first worker is up: a concurrent first use waits for it, or fails too
            if self._started:
                return
            first = _Worker(self.isolation, self.limits)
            self.landlock = first.landlock > 0
            if self.landlock:
                self.confinement = f"landlock ABI {first.landlock}"
            else:
                self.confinement = "bwrap's read-only view only (no Landlock)"
                log.warning(
                    "WARNING: this kernel has no Landlock: sandbox children's writes are confined only by bwrap's "
                    "read-only view (a child can write anywhere in its sandbox's /tmp; under trusted, anywhere)"
                )
            if self.isolation == "bwrap":
                log.info(kernel_memory_note())
            self._all.append(first)
            self._idle.put(first)
            for _ in range(self.workers - 1):
                self._idle.put(None)  # started lazily, in the pool threads
            self._started = True

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """End every process of this sandbox and hand their uids back (also at exit for one never closed)."""
        if self._pool:
            self._pool.shutdown(wait=True, cancel_futures=True)
        with self._lock:
            everyone, self._all = self._all, []
            self._live.clear()
        for worker in everyone:
            worker.kill(grace=5)  # nothing of it is kept: bwrap's PID namespace (or, trusted, its process group) ends
        _OPEN.discard(self)

    def end_instances(self) -> int:
        """End every idle environment instance (the shared workers stay): an environment's next trajectory starts
        on a new instance, as in a new sandbox. Returns how many ended."""
        with self._lock:
            ended = list(self._live.values())
            self._live.clear()
            self._all = [w for w in self._all if w not in ended]
        for worker in ended:
            worker.kill(grace=5)  # as close() ends them
        return len(ended)

    def live_instances(self) -> int:
        """How many environment instances are kept idle for their environments' next trajectories."""
        with self._lock:
            return len(self._live)

    def _discard(self, worker: _Worker) -> None:
        worker.kill()
        with self._lock:
            if worker in self._all:
                self._all.remove(worker)
            self.workers_replaced += 1

    def _run_batch(self, batch: list[Trajectory], limits: Limits) -> list[dict[str, Any]]:
        """Run consecutive trajectories of trusted code on one shared worker, all queued at once (see
        :meth:`_on_workers` for a lost worker)."""
        worker = self._idle.get()
        try:
            results, worker = self._on_workers(batch, limits, worker, None)
        finally:
            self._idle.put(worker)
        return results

    def _run_instance(self, batch: list[Trajectory], limits: Limits, key: tuple[str, ...]) -> list[dict[str, Any]]:
        """Run one environment's trajectories of untrusted code in a sandbox instance of their own (its own
        bwrap namespaces and /tmp, a worker that only ever received this environment's code, a fresh child per
        trajectory), kept for its later trajectories while at most ``max_live`` are idle. ``key``: the
        environment (:func:`_instance_key`) and the lane (up to ``workers`` instances of one environment)."""
        with self._turns:
            while key in self._busy:  # one instance per environment and lane: a later batch of it waits for it
                self._turns.wait()
            self._busy.add(key)
            with self._lock:
                worker = self._live.pop(key, None)
        ended: list[_Worker] = []
        try:
            results, worker = self._on_workers(batch, limits, worker, batch[0].env.source)
            if worker is not None:
                with self._lock:  # kept for its environment's next batch (before that batch may take it)
                    self._live[key] = worker
                    while len(self._live) > self.max_live:
                        ended.append(self._live.popitem(last=False)[1])
                    for old in ended:
                        if old in self._all:
                            self._all.remove(old)
        finally:
            with self._turns:
                self._busy.discard(key)
                self._turns.notify_all()
        for old in ended:
            old.kill()
        return results

    def _on_workers(
        self, batch: list[Trajectory], limits: Limits, worker: _Worker | None, instance: str | None
    ) -> tuple[list[dict[str, Any]], _Worker | None]:
        """Run ``batch`` on ``worker`` (None: a new one); a lost worker is replaced and what it had not finished
        goes to the new one (the trajectory it was running too, once, when it had not started)."""
        results: list[dict[str, Any] | None] = [None] * len(batch)
        todo = list(range(len(batch)))
        retried: set[int] = set()
        try:
            while todo:
                if worker is None:
                    try:
                        worker = _Worker(self.isolation, self.limits, instance)
                    except (SandboxUnavailable, OSError) as exc:
                        for i in todo:
                            results[i] = _not_run(batch[i], exc)
                        break
                    with self._lock:
                        self._all.append(worker)
                        self.instances_started += instance is not None
                todo, lost = self._send_and_receive(worker, batch, limits, todo, results, retried)
                if lost:
                    self._discard(worker)  # the worker is gone: the rest goes to a new one
                    worker = None
        except BaseException:
            if instance is not None and worker is not None:
                self._discard(worker)
            raise
        return results, worker  # type: ignore[return-value]

    def _send_and_receive(
        self,
        worker: _Worker,
        batch: list[Trajectory],
        limits: Limits,
        todo: list[int],
        results: list[dict[str, Any] | None],
        retried: set[int],
    ) -> tuple[list[int], bool]:
        """Queue ``todo`` on ``worker`` and read their results; (what is left, whether the worker was lost)."""
        sent = []
        for i in todo:
            try:
                worker.send(batch[i], limits)
                sent.append(i)
            except KeyError as exc:  # a blob the parent does not hold: a catalog problem, not env code
                results[i] = _not_run(batch[i], exc.args[0])
        for k, i in enumerate(sent):
            try:
                results[i] = worker.receive(batch[i], limits)
            except _WorkerLost as lost:
                if lost.result["init"] is None and not lost.result["steps"] and i not in retried:
                    retried.add(i)  # it never started: run it again, on a fresh worker
                    return sent[k:], True
                results[i] = lost.result
            except (SandboxError, OSError) as exc:
                results[i] = _not_run(batch[i], exc)
            else:
                continue
            return sent[k + 1 :], True
        return [], False

    def _queue(
        self, trajectories: Iterable[Trajectory], fresh_children: bool, window: int | None
    ) -> Iterator[tuple[list[int], list[Trajectory], Future[list[dict[str, Any]]]]]:
        """Queue ``trajectories`` on the pool as batches ``(positions in the input, batch, future)``, ``window`` at a
        time (None: all at once): a corpus's to its environment's instance, ours that may share a child together
        (up to ``max_batch``), the rest in batches of consecutive trajectories."""
        if self._pool is None:
            raise SandboxError("use Sandbox as a context manager")
        self._start()
        limits = replace(self.limits, reuse_children=1) if fresh_children else self.limits
        single = replace(limits, reuse_children=1)
        it = iter(trajectories)
        offset = 0
        while chunk := list(islice(it, window)) if window else list(it):
            keys = [registry.reuse_key(trajectory.env) for trajectory in chunk]
            untrusted: dict[tuple[str, ...], list[int]] = {}
            for i, trajectory in enumerate(chunk):
                if keys[i] is None:  # code that is not ours nor pinned: an instance of its own environment
                    untrusted.setdefault(_instance_key(trajectory), []).append(i)
            for key, idx in untrusted.items():
                lanes = max(1, min(self.workers, len(idx) // self.min_lane))
                for lane in range(lanes):  # an environment with many trajectories gets an instance per worker
                    part = idx[lane::lanes]
                    batch = [chunk[i] for i in part]
                    run = self._pool.submit(self._run_instance, batch, single, (*key, f"lane {lane}"))
                    yield [offset + i for i in part], batch, run
            own = [i for i in range(len(chunk)) if keys[i] is not None]
            if limits.reuse_children <= 1:  # fresh_children among them (limits above)
                groups = [(own[k : k + self.batch], limits) for k in range(0, len(own), self.batch)]
            else:
                by_key: dict[Any, list[int]] = {}
                for i in own:
                    by_key.setdefault(keys[i], []).append(i)
                shared = [idx for idx in by_key.values() if len(idx) > 1]
                # a trajectory alone with its key in the window runs in a fresh child (a warm one would idle)
                alone = sorted(idx[0] for idx in by_key.values() if len(idx) == 1)
                groups = [
                    (idx[k : k + self.max_batch], limits) for idx in shared for k in range(0, len(idx), self.max_batch)
                ]
                groups += [(alone[k : k + self.batch], single) for k in range(0, len(alone), self.batch)]
            for idx, batch_limits in groups:
                batch = [chunk[i] for i in idx]
                yield [offset + i for i in idx], batch, self._pool.submit(self._run_batch, batch, batch_limits)
            offset += len(chunk)
            if not window:
                break

    def submit(
        self, trajectories: Iterable[Trajectory], fresh_children: bool = False
    ) -> Iterator[tuple[Trajectory, dict[str, Any]]]:
        """Queue trajectories at once and return, without waiting, an iterator of their results in order."""
        return self._drain(deque(self._queue(trajectories, fresh_children, None)), {}, 0, until=None)

    def run(
        self, trajectories: Iterable[Trajectory], fresh_children: bool = False
    ) -> Iterator[tuple[Trajectory, dict[str, Any]]]:
        """Results in input order, about ``window`` to 2 × ``window`` trajectories queued ahead. ``fresh_children``:
        a newly forked child for every trajectory, never a reused one."""
        done: dict[int, tuple[Trajectory, dict[str, Any]]] = {}
        inflight: deque[tuple[list[int], list[Trajectory], Future[list[dict[str, Any]]]]] = deque()
        following = 0  # the next input position to yield
        for entry in self._queue(trajectories, fresh_children, self.window):
            inflight.append(entry)
            while inflight and max(inflight[-1][0]) - following >= 2 * self.window:
                following = yield from self._drain(inflight, done, following, until=following + self.window)
        following = yield from self._drain(inflight, done, following, until=None)

    @staticmethod
    def _drain(
        inflight: deque, done: dict[int, tuple[Trajectory, dict[str, Any]]], following: int, until: int | None
    ) -> Iterator[tuple[Trajectory, dict[str, Any]]]:
        """Yield the results of queued batches in input order from ``following`` up to ``until`` (None: all);
        returns the position to yield next."""
        while inflight and (until is None or following < until):
            positions, batch, future = inflight.popleft()
            for position, trajectory, result in zip(positions, batch, future.result()):
                done[position] = (trajectory, result)
            while following in done:
                yield done.pop(following)
                following += 1
        return following


_OPEN: set[Sandbox] = set()  # sandboxes entered and not closed yet (closed at exit)


@atexit.register
def _close_open() -> None:
    for box in list(_OPEN):
        box.close()
