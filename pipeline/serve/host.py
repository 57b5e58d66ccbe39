"""Session host: ``python -m pipeline.serve.host``, started inside ``bwrap`` like the labeling worker.

It prepares itself exactly as the worker does (:func:`pipeline.execution.worker.prepare`: preloaded sources, the
seccomp filter, Landlock, the frozen clock), then holds *live* environment instances, one forked child per session,
each under every rule a labeling child has. Requests from the parent (trusted): ``open`` (a session's environment,
its check functions, its limits), ``call`` (one tool call), ``close``. Each child builds its environment once and
answers each call with the raw ``step`` frame labeling uses (plus, when the task has checks, a ``checks`` frame), so
no prefix is ever re-run. A call past its wall-clock limit, a dead child or a malformed frame ends that session
alone (a ``lost`` frame); every frame goes to the parent tagged with its session id.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import resource
import select
import signal
import sys
import time
from functools import partial
from typing import Any

from pipeline.core.trajectory import Action
from pipeline.envs import blobs, registry
from pipeline.execution import child as runner
from pipeline.execution import freeze, landlock, seccomp, worker
from pipeline.execution.frames import FdReader, FrameError, encode, read_frame, write_chunks, write_frame
from pipeline.execution.wire import limits_from_wire, max_frame, trajectory_from_wire

#: the most steps one session may take (its CPU allowance grows with it)
MAX_STEPS = 256
#: the most live sessions one host holds (its process limit; each session is one process)
MAX_SESSIONS = 1024


_CHECKS: dict[str, Any] = {}  # check code -> its function (compiled once per session child)


def _check_function(code: str) -> Any:
    func = _CHECKS.get(code)
    if func is None:
        space: dict[str, Any] = {}
        exec(compile(code, "<check_func>", "exec"), space)
        func = space.get("check_func") or next(v for k, v in space.items() if callable(v) and k[:1] != "_")
        _CHECKS[code] = func
    return func


def run_checks(checks: list[str], initial: Any, final: Any) -> list[Any]:
    """Each check function's verdict on the state: ``check_func(final_state)`` or ``check_func(init_state,
    final_state)`` (EnvScaler's ``checklist_with_func``), True/False; a check that raises or answers
    something else gives ``None`` (it counts as failed in the mean). Runs in the session's child: check code is
    corpus data, untrusted like the environment's. Each check gets its own copy of the states."""
    out: list[Any] = []
    initial_text, final_text = json.dumps(initial), json.dumps(final)
    for code in checks:
        try:
            func = _check_function(code)
            params = len(inspect.signature(func).parameters)
            final_copy = json.loads(final_text)
            verdict = func(json.loads(initial_text), final_copy) if params >= 2 else func(final_copy)
            out.append(bool(verdict) if isinstance(verdict, (bool, int, float)) else None)
        except Exception:
            out.append(None)
    return out


def _session_child(out: int, requests: int, request: dict[str, Any], temp_dir: str) -> None:
    """One session's environment, live: built once, then one ``call`` request at a time until EOF."""
    worker._close_inherited()
    for fd in _SESSION_FDS:
        with contextlib.suppress(OSError):
            os.close(fd)
    limits = limits_from_wire(request["limits"])
    trajectory = trajectory_from_wire(request["trajectory"])
    cpu = int(max(30.0, limits.call_timeout_s * (MAX_STEPS + 20)))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
    blobs.retain_only(registry.blob_refs(trajectory.env))  # only its own environment's code
    registry.clear_caches()
    landlock.restrict(temp_dir)
    seccomp.install()
    worker._limit_child(limits)
    worker._enter(temp_dir, 0)
    freeze.install_for(trajectory)
    send = partial(write_frame, out)
    try:
        env = registry.build(trajectory.env)
        snapshots = runner._Snapshots(env, limits.max_state_mb << 20)
        initial_text = snapshots.take()
    except Exception as exc:
        send({"kind": "init_error", "error": f"{type(exc).__name__}: {str(exc)[:2000]}"})
        return
    checks = [c for c in request.get("checks") or [] if isinstance(c, str)]
    initial = json.loads(initial_text or "null")
    # the checks' verdicts on the initial state: the reward of an episode before (or without) a valid call
    verdicts = {"checks": run_checks(checks, initial, initial)} if checks else {}
    send({"kind": "init", "state": initial_text, **verdicts})
    judged = initial_text, verdicts.get("checks")  # the state the checks last ran on, and their verdicts
    inbox = os.fdopen(requests, "rb")
    while (msg := read_frame(inbox, max_size=1 << 30)) is not None:
        index = int(msg["step_index"])
        action = Action(str(msg["tool"]), dict(msg["arguments"]), index)
        frames = [encode(runner._call(env, index, action, snapshots, limits))]
        if checks:
            if snapshots.text != judged[0]:  # a call that left the state as it was keeps its verdicts
                judged = snapshots.text, run_checks(checks, initial, json.loads(snapshots.text or "null"))
            frames.append(encode({"kind": "checks", "step_index": index, "results": judged[1]}))
        frames.append(encode({"kind": "done", "step_index": index}))
        write_chunks(out, frames)  # one write: the host wakes once per call


class _Live:
    """A session's child as the host sees it: its pid, its pipes, its directory, the call in flight."""

    def __init__(self, sid: str, pid: int, reader: FdReader, requests: int, temp_dir: str) -> None:
        self.sid, self.pid, self.reader, self.requests, self.temp_dir = sid, pid, reader, requests, temp_dir
        self.deadline: float | None = None  # the call (or reset) in flight must answer by then
        self.tagged = worker._tagged(sid)


_SESSION_FDS: list[int] = []  # the host's ends of every session's pipes (closed in each new child)


class Host:
    """The host's sessions and its loop (see the module docstring)."""

    def __init__(self, proto_in: Any, proto_out: int) -> None:
        self.inbox = FdReader(proto_in.fileno(), 1 << 30)
        self.out = proto_out
        self.live: dict[str, _Live] = {}
        self.by_fd: dict[int, _Live] = {}
        self.limits: dict[str, float] = {}
        # one poll set kept as sessions come and go (not select(): a host holds more descriptors than FD_SETSIZE)
        self.poller = select.poll()
        self.poller.register(self.inbox.fd, select.POLLIN)

    def emit(self, sid: str, msg: dict[str, Any]) -> None:
        write_frame(self.out, {**msg, "trajectory_id": sid})

    def open(self, request: dict[str, Any]) -> None:
        sid = str(request["session"])
        if request.get("blobs"):
            blobs.update(request["blobs"])
        limits = limits_from_wire(request["limits"])
        temp_dir = worker._named(trajectory_from_wire(request["trajectory"]))  # a name from the episode: reproducible
        fds: list[int] = []
        try:
            fds += os.pipe()
            fds += os.pipe()
            worker._claim(temp_dir)
            os.mkdir(temp_dir, 0o700)
            pid = os.fork()
        except OSError:
            for fd in fds:
                os.close(fd)
            worker._remove_tree(temp_dir)
            worker._LIVE.discard(temp_dir)
            raise
        rfd, wfd, req_r, req_w = fds
        if pid == 0:
            os.close(rfd)
            os.close(req_w)
            worker._exit_after(wfd, partial(_session_child, wfd, req_r, request, temp_dir))
        os.close(wfd)
        os.close(req_r)
        _SESSION_FDS.extend([rfd, req_w])
        live = _Live(sid, pid, FdReader(rfd, max_frame(limits)), req_w, temp_dir)
        # the reset's limit: many sessions start at once and this host forks them one after the other
        live.deadline = time.monotonic() + max(limits.call_timeout_s, float(request.get("reset_timeout_s") or 0))
        self.live[sid], self.by_fd[rfd] = live, live
        self.poller.register(rfd, select.POLLIN)
        self.limits[sid] = limits.call_timeout_s

    def call(self, request: dict[str, Any]) -> None:
        live = self.live.get(str(request["session"]))
        if live is None:
            self.emit(str(request["session"]), {"kind": "lost", "error_type": "Closed", "error": "no such session"})
            return
        try:
            write_frame(live.requests, {"kind": "call", **{k: request[k] for k in ("step_index", "tool", "arguments")}})
        except OSError:
            self.end(live, ("WorkerCrash", "the session's process is gone"))
            return
        live.deadline = time.monotonic() + self.limits[live.sid]

    def end(self, live: _Live, failure: tuple[str, str] | None) -> None:
        """End a session's child (killed, reaped, its directory removed); a failure is reported as ``lost``."""
        worker._kill(live.pid)
        with contextlib.suppress(KeyError):
            self.poller.unregister(live.reader.fd)
        for fd in (live.reader.fd, live.requests):
            with contextlib.suppress(OSError):
                os.close(fd)
            with contextlib.suppress(ValueError):
                _SESSION_FDS.remove(fd)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(live.pid, 0)
        worker._remove_tree(live.temp_dir)
        worker._LIVE.discard(live.temp_dir)
        self.live.pop(live.sid, None)
        self.by_fd.pop(live.reader.fd, None)
        self.limits.pop(live.sid, None)
        if failure is not None:
            self.emit(live.sid, {"kind": "lost", "error_type": failure[0], "error": failure[1][:2000]})

    def pump(self, live: _Live) -> None:
        """Forward what the session's child sent (in one write); a bad frame or its end ends the session."""
        live.reader.feed()
        try:
            frames = live.reader.frames(with_raw=True)
        except FrameError as exc:
            self.end(live, ("UntrustedData", f"the environment process sent an invalid frame ({exc})"))
            return
        out: list[bytes | memoryview] = []
        ending = self._forward(live, frames, out)
        write_chunks(self.out, out)
        if ending is None and live.reader.eof:
            ending = ("WorkerCrash", "the environment process died")
        if ending is not None:
            self.end(live, ending or None)

    @staticmethod
    def _forward(live: _Live, frames: list[tuple[dict[str, Any], bytes]], out: list[bytes | memoryview]) -> Any:
        """Frames of one session's child onto ``out``, tagged with its session; what ends the session, if one
        does: a failure ``(type, message)``, or ``()`` for an end that is no failure (its environment failed)."""
        for msg, raw in frames:
            kind = msg.get("kind")
            if kind == "done":
                live.deadline = None
                continue
            if kind not in ("init", "init_error", "step", "checks", "fatal"):
                return ("UntrustedData", f"the environment process sent an unexpected {str(kind)[:40]!r} frame")
            if kind == "init":
                live.deadline = None
            out += live.tagged(raw)
            if kind in ("init_error", "fatal"):
                return ()
        return None

    def expire(self) -> float | None:
        """End sessions whose call is past its limit; the seconds until the next deadline (None: none)."""
        now, nearest = time.monotonic(), None
        for live in list(self.live.values()):
            if live.deadline is None:
                continue
            if live.deadline <= now:
                limit = self.limits[live.sid]
                self.end(live, ("Timeout", f"the call exceeded the {limit:g}s wall-clock limit; session ended"))
            else:
                nearest = live.deadline - now if nearest is None else min(nearest, live.deadline - now)
        return nearest

    def serve(self) -> None:
        while True:
            timeout = self.expire()
            ready = [fd for fd, _ in self.poller.poll(None if timeout is None else int(timeout * 1000) + 1)]
            for fd in ready:
                if fd == self.inbox.fd:
                    self.inbox.feed()
                    for request in self.inbox.frames():
                        kind = request.get("kind")
                        if kind == "open":
                            try:
                                self.open(request)
                            except OSError as exc:  # out of processes or descriptors: this session only
                                why = f"the session host cannot start another session ({exc})"
                                self.emit(str(request["session"]), {"kind": "init_error", "error": why})
                        elif kind == "call":
                            self.call(request)
                        elif kind == "close" and (live := self.live.get(str(request["session"]))) is not None:
                            self.end(live, None)
                    if self.inbox.eof:
                        for live in list(self.live.values()):
                            self.end(live, None)
                        return
                elif fd in self.by_fd:
                    self.pump(self.by_fd[fd])


def main() -> None:
    proto_in, proto_out, confinement = worker.prepare(sys.argv[1:], reuse=False, processes=MAX_SESSIONS + 16)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    write_frame(proto_out, {"kind": "ready", "pid": os.getpid(), "landlock": confinement})
    Host(proto_in, proto_out).serve()
    if worker._ROOT and worker._ROOT[0] != "/tmp/work":
        worker._remove_tree(worker._ROOT[0])


if __name__ == "__main__":
    sys.exit(main())
