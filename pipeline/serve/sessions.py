"""Live environment sessions in the sandbox: the parent side of :mod:`pipeline.serve.host`.

Usage::

    with SessionPool(max_sessions=64) as pool:
        session = pool.open(spec, episode="served/task-1/0", seed=0, checks=[...])
        step = session.call("add_to_cart", {"customer_id": "C001", "product_id": "P002"})
        step.labels["outcome"], step.labels["delta_size"], step.checks
        session.close()

A session is one environment instance in a live sandboxed child (forked in a session host: the shared one for code that
is ours or pinned, an instance of its own environment's for corpus code, as labeling runs them). The host hands this
process the child's pipe ends, so each call is one round trip to the child with no process between; its labels (outcome,
Δ, |Δ|, state hashes) are computed here from the raw frame by the labeling code
(:class:`pipeline.execution.labels.TrajectoryLabels`), so nothing inside can forge one. At most ``max_sessions`` are
live: one more is refused at once with :class:`CapacityError`. A session idle for ``idle_timeout_s`` is closed by the
reaper. A call past its wall-clock limit, a child that dies or sends malformed data ends that session only (its host
kills the child); a host that dies ends its own sessions only, and the next session starts a new one.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import json
import os
import queue
import select
import signal
import socket
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
from pipeline.execution.frames import FdReader, FrameError, encode, ready
from pipeline.execution.isolation import SandboxUnavailable, checked_isolation, worker_command
from pipeline.execution.labels import TrajectoryLabels
from pipeline.execution.wire import limits_to_wire, max_frame, trajectory_to_wire

HOST_MODULE = "pipeline.serve.host"
START_TIMEOUT_S = 60.0
GRACE_S = 5.0  # beyond a call's limit, before a silent host counts as lost
#: a reset's wall-clock limit (at least a call's): a burst of sessions is forked by one host one after the other
RESET_TIMEOUT_S = 60.0
#: how many sessions one child serves one after another (code that is ours or pinned: a session closed cleanly leaves
#: its child parked for the next session of the same environment code, as labeling keeps a warm child)
REUSES = 16
#: the most parked children a pool keeps (each a few MiB; one over is ended)
MAX_PARKED = 64


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


class _Channel:
    """A session's own pipes to its child (handed over by the host): requests written, frames read, directly.

    :meth:`receive` waits in the calling thread; :meth:`receive_async` on the running event loop (woken by the
    loop's own poll: no thread between). Either answers a frame, or a ``lost`` frame for a call past ``limit``
    seconds, a child that died, or one that sent an invalid frame."""

    def __init__(self, rfd: int, wfd: int, max_size: int) -> None:
        os.set_blocking(rfd, False)
        os.set_blocking(wfd, False)
        self.reader, self.wfd = FdReader(rfd, max_size), wfd
        self.pending: collections.deque[dict[str, Any]] = collections.deque()
        self.broken: dict[str, Any] | None = None

    def close(self) -> None:
        for fd in (self.reader.fd, self.wfd):
            with contextlib.suppress(OSError):
                os.close(fd)

    def send(self, data: bytes, limit: float) -> dict[str, Any] | None:
        """Write ``data`` (waiting while the pipe is full, up to ``limit`` s); a ``lost`` frame when it cannot."""
        view, deadline = memoryview(data), time.monotonic() + limit
        while view:
            try:
                view = view[os.write(self.wfd, view) :]
            except BlockingIOError:
                if not ready(self.wfd, select.POLLOUT, deadline - time.monotonic()):
                    return _timed_out(limit)
            except OSError:
                return dict(_DIED)
        return None

    def _pull(self) -> bool:
        """Read what the child sent; True once there is an answer (a frame, its end, or a broken frame)."""
        try:
            self.reader.feed()
        except BlockingIOError:
            pass
        except OSError:
            self.reader.eof = True
        try:
            self.pending.extend(self.reader.frames())
        except FrameError as exc:
            self.broken = {
                "kind": "lost",
                "error_type": "UntrustedData",
                "error": f"the environment process sent an invalid frame ({exc})",
            }
        return bool(self.pending) or self.broken is not None or self.reader.eof

    def _answer(self, limit: float) -> dict[str, Any]:
        if self.pending:
            return self.pending.popleft()
        if self.broken is not None:
            return self.broken
        return dict(_DIED) if self.reader.eof else _timed_out(limit)

    def receive(self, limit: float) -> dict[str, Any]:
        deadline = time.monotonic() + limit
        while not self.pending and self.broken is None and not self.reader.eof:
            if not ready(self.reader.fd, select.POLLIN, deadline - time.monotonic()):
                break
            self._pull()
        return self._answer(limit)

    async def send_async(self, data: bytes, limit: float) -> dict[str, Any] | None:
        """:meth:`send` on the running event loop (a full pipe is waited for there)."""
        view, deadline = memoryview(data), asyncio.get_running_loop().time() + limit
        while view:
            try:
                view = view[os.write(self.wfd, view) :]
            except BlockingIOError:
                if not await _awaited(self.wfd, True, deadline):
                    return _timed_out(limit)
            except OSError:
                return dict(_DIED)
        return None

    async def receive_async(self, limit: float) -> dict[str, Any]:
        """:meth:`receive` on the running event loop."""
        deadline = asyncio.get_running_loop().time() + limit
        while not self.pending and self.broken is None and not self.reader.eof:
            if not await _awaited(self.reader.fd, False, deadline):
                break
            self._pull()
        return self._answer(limit)


async def _awaited(fd: int, writing: bool, deadline: float) -> bool:
    """Whether ``fd`` became readable (``writing``: writable) before the loop's time ``deadline``."""
    loop = asyncio.get_running_loop()
    ready = loop.create_future()

    def wake(result: bool) -> None:
        if not ready.done():
            ready.set_result(result)

    (loop.add_writer if writing else loop.add_reader)(fd, wake, True)
    timer = loop.call_at(deadline, wake, False)
    try:
        return await ready
    finally:
        timer.cancel()
        (loop.remove_writer if writing else loop.remove_reader)(fd)


def _timed_out(limit: float) -> dict[str, Any]:
    return {
        "kind": "lost",
        "error_type": "Timeout",
        "error": f"the call exceeded the {limit:g}s wall-clock limit; session ended",
    }


#: what a session reads when its child's pipe ended
_DIED = {"kind": "lost", "error_type": "WorkerCrash", "error": "the environment process died"}


class _HostReader(FdReader):
    """Frames from a session host over its Unix socket, and the pipe ends that come with ``opened`` frames."""

    def __init__(self, sock: socket.socket, max_size: int) -> None:
        super().__init__(sock.fileno(), max_size)
        self.sock = sock
        self.fds: collections.deque[int] = collections.deque()

    def feed(self) -> None:
        data, fds, _, _ = socket.recv_fds(self.sock, 1 << 20, 16, socket.MSG_CMSG_CLOEXEC)
        self.fds.extend(fds)
        if data:
            self.buf += data
        else:
            self.eof = True


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
    """A running session host: its process, the socket its frames (and its children's pipe ends) come on, the
    sessions waiting for their child."""

    proc: subprocess.Popen
    sock: socket.socket
    uid: Any
    sent: set[str] = field(default_factory=set)
    inboxes: dict[str, queue.SimpleQueue] = field(default_factory=dict)  # sessions waiting for their child
    lock: threading.Lock = field(default_factory=threading.Lock)
    dead: bool = False

    def send(self, message: dict[str, Any]) -> None:
        data = encode(message)
        with self.lock:
            self.proc.stdin.write(data)  # type: ignore[union-attr]
            self.proc.stdin.flush()  # type: ignore[union-attr]

    def end(self, sid: str, channel: _Channel | None) -> None:
        """End the child the host knows as ``sid``: its pipes closed here, the child killed and reaped there."""
        if channel is not None:
            channel.close()
        if not self.dead:
            with contextlib.suppress(OSError, ValueError):
                self.send({"kind": "close", "session": sid})


@dataclass(eq=False)
class _Parked:
    """A child kept between sessions: its host, the session id its host knows it by, its pipes, the sessions it
    served, since when it waits."""

    host: _HostProc
    sid: str
    channel: _Channel
    uses: int
    since: float = field(default_factory=time.monotonic)

    def end(self) -> None:
        self.host.end(self.sid, self.channel)


class SessionPool:
    """Bounded live sessions over session hosts (see the module docstring)."""

    def __init__(
        self,
        max_sessions: int = 256,
        idle_timeout_s: float = 900.0,
        limits: Limits | None = None,
        isolation: str = "bwrap",
        reuses: int = REUSES,
    ) -> None:
        self.max_sessions = max_sessions
        self.reuses = max(1, reuses)  # sessions one child of code that is ours or pinned serves (1: a fork each)
        self.idle_timeout_s = idle_timeout_s
        self.limits = limits or Limits()
        self.isolation = checked_isolation(isolation)
        self._hosts: dict[tuple[str, ...], _HostProc] = {}
        self._sessions: dict[str, Session] = {}
        self._parked: dict[tuple[str, ...], list[_Parked]] = {}
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self._stop = threading.Event()
        # hosts are started from this one long-lived thread: bwrap's --die-with-parent ends a host with the thread
        # that started it, and a server's worker threads come and go
        self._starter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="session-host-start")
        self.reaped = 0
        threading.Thread(target=self._reap, name="session-reaper", daemon=True).start()

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
        """Close sessions idle longer than ``idle_timeout_s``, and end children parked as long (checked every
        second or so)."""
        while not self._stop.wait(min(1.0, self.idle_timeout_s / 4)):
            now = time.monotonic()
            with self._lock:
                idle = [s for s in self._sessions.values() if not s.busy and now - s.last_used > self.idle_timeout_s]
                stale = [p for kept in self._parked.values() for p in kept if now - p.since > self.idle_timeout_s]
                for kept in self._parked.values():
                    kept[:] = [p for p in kept if p not in stale]
            for session in idle:
                session.close("idle")
                self.reaped += 1
            for parked in stale:
                parked.end()

    def _park(self, session: Session) -> bool:
        """Keep a cleanly closed session's child for the next session of the same environment code; False: it is
        not one to keep (corpus code, its host gone, its sessions used up, the pool full or closing)."""
        host, channel = session.host, session.channel
        if session.reuse_key is None or host is None or host.dead or channel is None or session.uses >= self.reuses:
            return False
        with self._lock:
            if self._stop.is_set() or sum(map(len, self._parked.values())) >= MAX_PARKED:
                return False
            parked = _Parked(host, session.host_sid, channel, session.uses)
            self._parked.setdefault(session.reuse_key, []).append(parked)
        return True

    def _unpark(self, key: tuple[str, ...]) -> _Parked | None:
        with self._lock:
            kept = self._parked.get(key)
            return kept.pop() if kept else None

    # -- hosts -----------------------------------------------------------------------------------------
    def _host_for(self, env: EnvSpec) -> _HostProc:
        """The host a session of ``env`` runs in: the shared one for our or pinned code, else its environment's."""
        trusted = registry.reuse_key(env) is not None
        key = ("shared",) if trusted else ("instance", env.source, env.env_id, str(env.options.get("code_ref")))
        with self._lock:
            host = self._hosts.get(key)
            if host is not None and not host.dead:
                return host
            host = self._starter.submit(self._start_host, None if trusted else env.source).result()
            self._hosts[key] = host
            return host

    def _start_host(self, preload: str | None) -> _HostProc:
        launch = worker_command(self.isolation, self.limits.tmp_mb, preload, module=HOST_MODULE)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            proc = subprocess.Popen(
                launch.argv,
                stdin=subprocess.PIPE,
                stdout=theirs.fileno(),
                stderr=subprocess.DEVNULL,
                env=launch.env,
                cwd=launch.cwd,
                pass_fds=launch.pass_fds,
                start_new_session=True,
            )
        except BaseException:
            ours.close()
            if launch.uid is not None:
                launch.uid.release()
            raise
        finally:
            theirs.close()
            launch.close()
        host = _HostProc(proc, ours, launch.uid)
        reader = _HostReader(ours, max_frame(self.limits))
        try:
            hello = reader.next(START_TIMEOUT_S)
        except FrameError as exc:
            hello, why = None, str(exc)
        else:
            why = f"exit code {proc.poll()}"
        if not hello or hello.get("kind") != "ready":
            self._kill(host)
            ours.close()
            raise SandboxUnavailable(f"session host ({self.isolation}) failed to start ({why})")
        threading.Thread(target=self._route, args=(host, reader), name="session-host", daemon=True).start()
        return host

    def _route(self, host: _HostProc, reader: _HostReader) -> None:
        """Hand each frame from a host to its session's inbox (an ``opened`` one with the child's pipe ends); a
        host that ends or breaks the protocol ends every session still waiting for its child (a ``lost`` frame)."""
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
            if msg.get("kind") == "opened":
                if len(reader.fds) < 2:
                    why = "the session host sent a session without its pipes"
                    break
                msg["fds"] = [reader.fds.popleft(), reader.fds.popleft()]
            inbox = host.inboxes.get(str(msg.get("trajectory_id")))
            if inbox is not None:
                inbox.put(msg)
            else:
                for fd in msg.get("fds", ()):
                    os.close(fd)
        host.dead = True
        for inbox in list(host.inboxes.values()):
            inbox.put({"kind": "lost", "error_type": "WorkerCrash", "error": why})
        self._kill(host)
        for fd in reader.fds:
            os.close(fd)
        host.sock.close()

    @staticmethod
    def _kill(host: _HostProc) -> None:
        host.dead = True
        with contextlib.suppress(OSError):
            host.proc.stdin.close()  # type: ignore[union-attr]
        with contextlib.suppress(OSError):
            host.sock.shutdown(socket.SHUT_RDWR)  # its reader wakes to the end (and closes the socket)
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
            parked = [p for kept in self._parked.values() for p in kept]
            self._parked.clear()
            hosts, self._hosts = list(self._hosts.values()), {}
        for one in parked:
            one.end()
        for host in hosts:
            self._kill(host)
        self._starter.shutdown(wait=True)


class Session:
    """One live environment instance (:meth:`SessionPool.open`)."""

    def __init__(self, pool: SessionPool, sid: str, env: EnvSpec, episode: str, seed: int, checks: list[str]) -> None:
        self.pool, self.sid, self.env, self.checks = pool, sid, env, checks
        self.trajectory = Trajectory(episode, episode, env, (), strategy="served", seed=seed)
        self.labels = _LiveLabels(self.trajectory, pool.limits.max_observation_chars)
        self.inbox: queue.SimpleQueue[dict[str, Any]] = queue.SimpleQueue()  # its host's answer to ``open``
        self.host: _HostProc | None = None
        self.channel: _Channel | None = None  # its child's pipes, once the host forked it
        self.reuse_key = registry.reuse_key(env)  # None: corpus code, a child of its own that serves no other
        self.host_sid = sid  # the id its child's host knows the child by (the first session's, for a kept child)
        self.uses = 1  # the sessions its child served, this one included
        self.closed: str | None = None  # why it ended (None: live)
        self.busy = False
        self.last_used = time.monotonic()
        self.initial_checks: list[bool | None] | None = None  # the checks' verdicts on the initial state

    @property
    def state(self) -> Any:
        """The environment's current state (canonical JSON value), as labeled."""
        return self.labels.state

    def _start(self) -> None:
        parked = self.pool._unpark(self.reuse_key) if self.reuse_key is not None else None
        if parked is not None and self._resume(parked):
            return
        host = self.pool._host_for(self.env)
        self.host = host
        host.inboxes[self.sid] = self.inbox
        new = {ref: blobs.get(ref) for ref in registry.blob_refs(self.env) if ref not in host.sent}
        limit = max(RESET_TIMEOUT_S, self.pool.limits.call_timeout_s)
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
                    "reuses": self.pool.reuses if self.reuse_key is not None else 1,
                }
            )
            host.sent.update(new)
            try:
                msg = self.inbox.get(timeout=limit + GRACE_S)
            except queue.Empty:
                msg = {"kind": "lost", "error": "the session host forked no environment process in time"}
            host.inboxes.pop(self.sid, None)
            if msg.get("kind") == "opened":
                self.channel = _Channel(*msg["fds"], max_frame(self.pool.limits))
                msg = self.channel.receive(limit)
            self._started(msg)
        except (OSError, ValueError) as exc:
            self._end("host lost")
            raise SessionError(f"the session host is gone ({exc})") from None
        finally:
            self.busy = False
            self.last_used = time.monotonic()

    def _resume(self, parked: _Parked) -> bool:
        """Start this session in a parked child (a ``reset`` on its pipe); False: the child did not answer with
        an initial state (it is ended, and a fresh one is forked)."""
        limit = max(RESET_TIMEOUT_S, self.pool.limits.call_timeout_s)
        request = {"kind": "reset", "trajectory": trajectory_to_wire(self.trajectory), "checks": self.checks}
        msg = parked.channel.send(encode(request), limit) or parked.channel.receive(limit)
        if msg.get("kind") != "init":
            parked.end()
            return False
        self.host, self.host_sid, self.channel, self.uses = parked.host, parked.sid, parked.channel, parked.uses + 1
        self._started(msg)
        self.last_used = time.monotonic()
        return True

    def _started(self, msg: dict[str, Any]) -> None:
        """Take the child's first frame: its initial state (and the checks' verdicts on it), else end the session
        with a :class:`SessionError` naming why it did not start."""
        self.labels.feed(msg)
        if msg.get("kind") != "init" or self.labels.result["init"] is None:
            error = self.labels.result["init_error"] or msg.get("error") or "the environment did not start"
            self._end(f"reset failed: {error}")
            raise SessionError(f"reset failed: {str(error)[:500]}")
        if self.checks:
            self.initial_checks = _verdicts(msg.get("checks"), len(self.checks))

    def call(self, tool: str, arguments: dict[str, Any]) -> StepResult:
        """Run one tool call on the live instance; raises :class:`SessionError` on a closed session."""
        exchange = self._exchange(tool, arguments)
        limit = self.pool.limits.call_timeout_s
        try:
            want = next(exchange)
            while True:
                channel = self.channel
                want = exchange.send(channel.send(want, limit) if isinstance(want, bytes) else channel.receive(want))
        except StopIteration as answer:
            return answer.value

    async def call_async(self, tool: str, arguments: dict[str, Any]) -> StepResult:
        """:meth:`call` on a running event loop: the answer is awaited there, with no worker thread."""
        exchange = self._exchange(tool, arguments)
        limit = self.pool.limits.call_timeout_s
        try:
            want = next(exchange)
            while True:
                channel = self.channel
                reply = channel.send_async(want, limit) if isinstance(want, bytes) else channel.receive_async(want)
                want = exchange.send(await reply)
        except StopIteration as answer:
            return answer.value

    def _exchange(self, tool: str, arguments: dict[str, Any]) -> Generator[Any, Any, StepResult]:
        """One call as a conversation with the child: yields the request (bytes, answered by None once sent, or a
        ``lost`` frame), then how long to wait for each frame (answered by that frame, or a ``lost`` one); returns
        the step (:meth:`call` and :meth:`call_async` drive it)."""
        if self.closed is not None:
            raise SessionError(f"session {self.sid} is closed ({self.closed})")
        index = len(self.labels.actions)
        self.labels.actions.append(Action(tool, json.loads(canonical_json(arguments)), index))
        self.busy = True
        checks: list[bool | None] | None = None
        steps = self.labels.result["steps"]
        try:
            request = {"kind": "call", "step_index": index, "tool": tool, "arguments": arguments}
            msg = (yield encode(request)) or (yield self.pool.limits.call_timeout_s)
            failure = None if msg.get("kind") == "step" else _failure(msg)
            if failure is None:
                self.labels.feed(msg)  # a frame that breaks the protocol becomes an error step here
                if self.checks and not self.labels.truncated:
                    checks = _verdicts(msg.get("checks"), len(self.checks))  # sent with the step, in its frame
            if failure is not None or self.labels.truncated or len(steps) <= index:
                failure = failure or {"error_type": "UntrustedData", "error": "malformed data from the sandbox"}
                if len(steps) <= index:
                    self.labels.lost(index, str(failure.get("error_type"))[:200], str(failure.get("error"))[:2000])
                self._end(f"call lost: {failure.get('error_type')}: {str(failure.get('error'))[:300]}")
        finally:
            self.busy = False
            self.last_used = time.monotonic()
        step = steps[index]
        return StepResult(step["raw_observation"], step, self.labels.state, checks, alive=self.closed is None)

    def _end(self, why: str) -> None:
        self.closed = why
        if self.host is not None:
            self.host.end(self.host_sid, self.channel)
        self.pool._forget(self)

    def close(self, why: str = "closed") -> None:
        """End the session: its child is killed and its directory removed, or, closed cleanly on code that is ours
        or pinned, kept for the next session of the same environment code. Closing twice is harmless."""
        if self.closed is None:
            if why == "closed" and not self.busy and self.pool._park(self):
                self.closed = why
                self.pool._forget(self)
                return
            self._end(why)


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
