"""Live environment sessions in the sandbox: the parent side of :mod:`pipeline.serve.host`.

Usage::

    with SessionPool(max_sessions=64) as pool:
        session = pool.open(spec, episode="served/task-1/0", seed=0, checks=[...])
        step = session.call("add_to_cart", {"customer_id": "C001", "product_id": "P002"})
        step.labels["outcome"], step.labels["delta_size"], step.checks
        session.close()

A session is one environment instance in a live sandboxed child (forked in a session host: the shared one for code
that is ours or pinned, an instance of its own environment's for corpus code, as labeling runs them). Each call is
one round trip; its labels (outcome, Δ, |Δ|, state hashes) are computed here from the raw frame by the labeling
code (:class:`pipeline.execution.labels.TrajectoryLabels`), so nothing inside can forge one. At most
``max_sessions`` are live: one more is refused at once with :class:`CapacityError`. A session idle for
``idle_timeout_s`` is closed by the reaper. A call that hangs, a child that dies or sends malformed data ends that
session only; a host that dies ends its own sessions only, and the next session starts a new one.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import json
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Generator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from pipeline.core.canonical import canonical_json
from pipeline.core.environment import EnvSpec
from pipeline.core.trajectory import Action, Trajectory
from pipeline.envs import blobs, registry
from pipeline.execution.child import Limits
from pipeline.execution.frames import FdReader, FrameError, encode
from pipeline.execution.isolation import SandboxUnavailable, checked_isolation, worker_command
from pipeline.execution.labels import TrajectoryLabels
from pipeline.execution.wire import limits_to_wire, max_frame, trajectory_to_wire

HOST_MODULE = "pipeline.serve.host"
START_TIMEOUT_S = 60.0
GRACE_S = 5.0  # beyond a call's limit, before a silent host counts as lost
#: a reset's wall-clock limit (at least a call's): a burst of sessions is forked by one host one after the other
RESET_TIMEOUT_S = 60.0


class SessionError(RuntimeError):
    """A session that cannot go on (its environment failed to start, a call was lost, it was closed)."""


class CapacityError(SessionError):
    """Every session slot is taken."""

    def __init__(self, active: int, limit: int) -> None:
        super().__init__(
            f"session capacity reached: {active} of {limit} sessions are live; close one, or start the server "
            f"with more (--max-sessions)"
        )
        self.active, self.limit = active, limit


class _LiveLabels(TrajectoryLabels):
    """Labels of an episode whose actions arrive one at a time (the labeling rules, unchanged)."""

    def __init__(self, trajectory: Trajectory, max_chars: int) -> None:
        super().__init__(trajectory, max_chars)
        self.actions: list[Action] = []

    def pending_action(self, index: int | None) -> Action | None:
        if index is None or not 0 <= index < len(self.actions):
            return None
        return self.actions[index]

    def next_index(self) -> int | None:
        done = len(self.result["steps"])
        return done if done < len(self.actions) else None


class _Inbox:
    """A session's frames from its host's reader thread, awaited by one caller: a blocking thread (:meth:`get`) or
    a coroutine on an event loop (:meth:`get_async`, woken by the reader thread with no worker thread between)."""

    def __init__(self) -> None:
        self._items: collections.deque[dict[str, Any]] = collections.deque()
        self._ready = threading.Condition()
        self._waiter: tuple[asyncio.AbstractEventLoop, asyncio.Future] | None = None

    def put(self, msg: dict[str, Any]) -> None:
        with self._ready:
            self._items.append(msg)
            waiter, self._waiter = self._waiter, None
            self._ready.notify()
        if waiter is not None:
            with contextlib.suppress(RuntimeError):  # its loop closed meanwhile: nobody waits any more
                waiter[0].call_soon_threadsafe(_wake, waiter[1])

    def get(self, timeout: float) -> dict[str, Any]:
        with self._ready:
            if not self._ready.wait_for(lambda: self._items, timeout):
                raise queue.Empty
            return self._items.popleft()

    async def get_async(self, timeout: float) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        with self._ready:
            if self._items:
                return self._items.popleft()
            arrived = loop.create_future()
            self._waiter = loop, arrived
        try:
            await asyncio.wait_for(arrived, timeout)
        except TimeoutError:
            pass
        with self._ready:
            self._waiter = None
            if not self._items:
                raise queue.Empty
            return self._items.popleft()


def _wake(arrived: asyncio.Future) -> None:
    if not arrived.done():
        arrived.set_result(None)


@dataclass
class StepResult:
    """One call's answer: the observation an agent sees, the executor's labels for the step (the labeling row:
    ``outcome``, ``delta``, ``delta_size``, ``state_before_hash``/``state_after_hash``, …), the state after it,
    and each check's verdict on that state (None: the task has no checks)."""

    observation: str
    labels: dict[str, Any]
    state: Any
    checks: list[bool | None] | None = None
    alive: bool = True  # False: the call was lost and the session ended with it


@dataclass
class _HostProc:
    """A running session host: its process, its reader thread, the sessions it serves."""

    proc: subprocess.Popen
    uid: Any
    key: tuple[str, ...]
    sent: set[str] = field(default_factory=set)
    inboxes: dict[str, _Inbox] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    dead: bool = False

    def send(self, message: dict[str, Any]) -> None:
        data = encode(message)
        with self.lock:
            self.proc.stdin.write(data)  # type: ignore[union-attr]
            self.proc.stdin.flush()  # type: ignore[union-attr]


class SessionPool:
    """Bounded live sessions over session hosts (see the module docstring)."""

    def __init__(
        self,
        max_sessions: int = 256,
        idle_timeout_s: float = 900.0,
        limits: Limits | None = None,
        isolation: str = "bwrap",
    ) -> None:
        self.max_sessions = max_sessions
        self.idle_timeout_s = idle_timeout_s
        self.limits = limits or Limits()
        self.isolation = checked_isolation(isolation)
        self._hosts: dict[tuple[str, ...], _HostProc] = {}
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self._stop = threading.Event()
        # hosts are started from this one long-lived thread: bwrap's --die-with-parent ends a host with the thread
        # that started it, and a server's worker threads come and go
        self._starter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="session-host-start")
        self._reaper = threading.Thread(target=self._reap, name="session-reaper", daemon=True)
        self._reaper.start()
        self.reaped = 0

    def __enter__(self) -> SessionPool:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def active(self) -> int:
        return len(self._sessions)

    # -- sessions --------------------------------------------------------------------------------------
    def open(self, env: EnvSpec, episode: str, seed: int = 0, checks: list[str] | None = None) -> Session:
        """A new session on ``env`` (reset done): ``episode`` names it for the frozen clock and seeds (the same
        episode, seed and calls give the same observations and states). :class:`CapacityError` when full."""
        with self._lock:
            if len(self._sessions) >= self.max_sessions:
                raise CapacityError(len(self._sessions), self.max_sessions)
            sid = f"s{next(self._ids)}"
            session = Session(self, sid, env, episode, seed, list(checks or []))
            self._sessions[sid] = session
        try:
            session._start()
        except BaseException:
            self._forget(session)
            raise
        return session

    def _forget(self, session: Session) -> None:
        with self._lock:
            self._sessions.pop(session.sid, None)
        host = session.host
        if host is not None:
            host.inboxes.pop(session.sid, None)

    def _reap(self) -> None:
        """Close sessions idle longer than ``idle_timeout_s`` (checked every second or so)."""
        while not self._stop.wait(min(1.0, self.idle_timeout_s / 4)):
            now = time.monotonic()
            with self._lock:
                idle = [s for s in self._sessions.values() if not s.busy and now - s.last_used > self.idle_timeout_s]
            for session in idle:
                session.close("idle")
                self.reaped += 1

    # -- hosts -----------------------------------------------------------------------------------------
    def _host_for(self, env: EnvSpec) -> _HostProc:
        """The host a session of ``env`` runs in: the shared one for our or pinned code, else its environment's."""
        trusted = registry.reuse_key(env) is not None
        key = ("shared",) if trusted else ("instance", env.source, env.env_id, str(env.options.get("code_ref")))
        with self._lock:
            host = self._hosts.get(key)
            if host is not None and not host.dead:
                return host
            host = self._starter.submit(self._start_host, key, None if trusted else env.source).result()
            self._hosts[key] = host
            return host

    def _start_host(self, key: tuple[str, ...], preload: str | None) -> _HostProc:
        launch = worker_command(self.isolation, self.limits.tmp_mb, preload, module=HOST_MODULE)
        try:
            proc = subprocess.Popen(
                launch.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=launch.env,
                cwd=launch.cwd,
                pass_fds=launch.pass_fds,
                start_new_session=True,
            )
        except BaseException:
            if launch.uid is not None:
                launch.uid.release()
            raise
        finally:
            launch.close()
        host = _HostProc(proc, launch.uid, key)
        reader = FdReader(proc.stdout.fileno(), max_frame(self.limits))  # type: ignore[union-attr]
        try:
            hello = reader.next(START_TIMEOUT_S)
        except FrameError as exc:
            hello, why = None, str(exc)
        else:
            why = f"exit code {proc.poll()}"
        if not hello or hello.get("kind") != "ready":
            self._kill(host)
            raise SandboxUnavailable(f"session host ({self.isolation}) failed to start ({why})")
        threading.Thread(target=self._route, args=(host, reader), name="session-host", daemon=True).start()
        return host

    def _route(self, host: _HostProc, reader: FdReader) -> None:
        """Hand each frame from a host to its session's inbox; a host that ends or breaks the protocol ends
        every session it served (each gets a ``lost`` frame)."""
        why = "the session host ended"
        while True:
            try:
                msg = reader.next(3600.0)
            except OSError:
                break  # closed here (the pool is closing)
            except FrameError as exc:
                if "no frame within" in str(exc):
                    continue
                why = f"the session host broke the protocol ({exc})"
                break
            if msg is None:
                break
            inbox = host.inboxes.get(str(msg.get("trajectory_id")))
            if inbox is not None:
                inbox.put(msg)
        host.dead = True
        for inbox in list(host.inboxes.values()):
            inbox.put({"kind": "lost", "error_type": "WorkerCrash", "error": why})
        self._kill(host)

    @staticmethod
    def _kill(host: _HostProc) -> None:
        host.dead = True
        for stream in (host.proc.stdin, host.proc.stdout):
            with contextlib.suppress(OSError):
                if stream:
                    stream.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            host.proc.wait(timeout=2)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(host.proc.pid, signal.SIGKILL)
        host.proc.wait()
        if host.uid is not None:
            host.uid.release()
            host.uid = None

    def close(self) -> None:
        """Close every session and end every host (nothing of them is left)."""
        self._stop.set()
        for session in list(self._sessions.values()):
            session.close("shutdown")
        with self._lock:
            hosts, self._hosts = list(self._hosts.values()), {}
        for host in hosts:
            self._kill(host)
        self._starter.shutdown(wait=True)


class Session:
    """One live environment instance (:meth:`SessionPool.open`)."""

    def __init__(self, pool: SessionPool, sid: str, env: EnvSpec, episode: str, seed: int, checks: list[str]) -> None:
        self.pool, self.sid, self.env, self.checks = pool, sid, env, checks
        self.trajectory = Trajectory(episode, episode, env, (), strategy="served", seed=seed)
        self.labels = _LiveLabels(self.trajectory, pool.limits.max_observation_chars)
        self.inbox = _Inbox()
        self.host: _HostProc | None = None
        self.closed: str | None = None  # why it ended (None: live)
        self.busy = False
        self.last_used = time.monotonic()
        self.initial_checks: list[bool | None] | None = None  # the checks' verdicts on the initial state

    @property
    def state(self) -> Any:
        """The environment's current state (canonical JSON value), as labeled."""
        return self.labels.state

    @property
    def steps(self) -> list[dict[str, Any]]:
        return self.labels.result["steps"]

    def _timeout(self) -> float:
        return self.pool.limits.call_timeout_s + GRACE_S

    def _next(self, timeout: float | None = None) -> dict[str, Any]:
        try:
            return self.inbox.get(timeout or self._timeout())
        except queue.Empty:
            return dict(_SILENT)

    def _start(self) -> None:
        host = self.pool._host_for(self.env)
        self.host = host
        host.inboxes[self.sid] = self.inbox
        new = {ref: blobs.get(ref) for ref in registry.blob_refs(self.env) if ref not in host.sent}
        self.busy = True
        try:
            host.send(
                {
                    "kind": "open",
                    "session": self.sid,
                    "trajectory": trajectory_to_wire(self.trajectory),
                    "limits": limits_to_wire(self.pool.limits),
                    "blobs": new,
                    "checks": self.checks,
                    "reset_timeout_s": RESET_TIMEOUT_S,
                }
            )
            host.sent.update(new)
            msg = self._next(max(RESET_TIMEOUT_S, self.pool.limits.call_timeout_s) + GRACE_S)
            self.labels.feed(msg)
            if msg.get("kind") != "init" or self.labels.result["init"] is None:
                error = self.labels.result["init_error"] or msg.get("error") or "the environment did not start"
                self._end(f"reset failed: {error}")
                raise SessionError(f"reset failed: {str(error)[:500]}")
            if self.checks:
                self.initial_checks = _verdicts(msg.get("checks"), len(self.checks))
        except (OSError, ValueError) as exc:
            self._end("host lost")
            raise SessionError(f"the session host is gone ({exc})") from None
        finally:
            self.busy = False
            self.last_used = time.monotonic()

    def call(self, tool: str, arguments: dict[str, Any]) -> StepResult:
        """Run one tool call on the live instance; raises :class:`SessionError` on a closed session."""
        exchange = self._exchange(tool, arguments)
        try:
            timeout = next(exchange)
            while True:
                timeout = exchange.send(self._next(timeout))
        except StopIteration as answer:
            return answer.value

    async def call_async(self, tool: str, arguments: dict[str, Any]) -> StepResult:
        """:meth:`call` on a running event loop: the answer is awaited there, with no worker thread."""
        exchange = self._exchange(tool, arguments)
        try:
            timeout = next(exchange)
            while True:
                try:
                    msg = await self.inbox.get_async(timeout)
                except queue.Empty:
                    msg = dict(_SILENT)
                timeout = exchange.send(msg)
        except StopIteration as answer:
            return answer.value

    def _exchange(self, tool: str, arguments: dict[str, Any]) -> Generator[float, dict[str, Any], StepResult]:
        """One call as a conversation with the host: yields how long to wait for the next frame, is sent that
        frame (or :data:`_SILENT`), returns the step (:meth:`call` and :meth:`call_async` drive it)."""
        if self.closed is not None:
            raise SessionError(f"session {self.sid} is closed ({self.closed})")
        index = len(self.labels.actions)
        self.labels.actions.append(Action(tool, json.loads(canonical_json(arguments)), index))
        self.busy = True
        checks: list[bool | None] | None = None
        try:
            try:
                self.host.send(  # type: ignore[union-attr]
                    {"kind": "call", "session": self.sid, "step_index": index, "tool": tool, "arguments": arguments}
                )
            except (OSError, ValueError):  # its pipe is closed: the host ended
                self.inbox.put({"kind": "lost", "error_type": "WorkerCrash", "error": "the session host is gone"})
            msg = yield self._timeout()
            failure = None if msg.get("kind") == "step" else _failure(msg)
            if failure is None:
                self.labels.feed(msg)  # a frame that breaks the protocol becomes an error step here
                if self.checks and not self.labels.truncated:
                    reply = yield self._timeout()
                    if reply.get("kind") == "checks" and reply.get("step_index") == index:
                        checks = _verdicts(reply.get("results"), len(self.checks))
                    else:
                        failure = _failure(reply)
            if failure is not None or self.labels.truncated or len(self.steps) <= index:
                failure = failure or {"error_type": "UntrustedData", "error": "malformed data from the sandbox"}
                if len(self.steps) <= index:
                    self.labels.lost(index, str(failure.get("error_type"))[:200], str(failure.get("error"))[:2000])
                self._end(f"call lost: {failure.get('error_type')}: {str(failure.get('error'))[:300]}")
        finally:
            self.busy = False
            self.last_used = time.monotonic()
        step = self.steps[index]
        return StepResult(step["raw_observation"], step, self.labels.state, checks, alive=self.closed is None)

    def _end(self, why: str) -> None:
        self.closed = why
        host = self.host
        if host is not None and not host.dead:
            with contextlib.suppress(OSError, ValueError):
                host.send({"kind": "close", "session": self.sid})
        self.pool._forget(self)

    def close(self, why: str = "closed") -> None:
        """End the session (its child is killed, its directory removed); closing twice is harmless."""
        if self.closed is None:
            self._end(why)


#: what a session reads when its host sent nothing within the limit
_SILENT = {"kind": "lost", "error_type": "Timeout", "error": "the session host sent nothing in time"}


def _verdicts(results: Any, count: int) -> list[bool | None]:
    """Check verdicts from inside, as plain data: one True/False/None per check, anything else None."""
    if not isinstance(results, list):
        return [None] * count
    out = [r if isinstance(r, bool) or r is None else None for r in results[:count]]
    return out + [None] * (count - len(out))


def _failure(msg: dict[str, Any]) -> dict[str, Any]:
    """A frame that is not the answer expected, as a ``lost`` reason (a child's ``fatal`` names its exception)."""
    if msg.get("kind") == "lost":
        return msg
    kind = str(msg.get("kind"))[:40]
    return {"error_type": "WorkerCrash" if kind == "fatal" else "UntrustedData", "error": f"{kind}: {msg.get('error')}"}
