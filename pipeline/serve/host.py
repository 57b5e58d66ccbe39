"""Session host: ``python -m pipeline.serve.host``, started inside ``bwrap`` like the labeling worker.

It prepares itself exactly as the worker does (:func:`pipeline.execution.worker.prepare`: preloaded adapters, the
seccomp filter, Landlock, the frozen clock), then forks *live* environment instances, one child per session, each under
every rule a labeling child has. Requests from the parent (trusted): ``open`` (a session's environment, its check
functions, its limits) and ``close``. For each ``open`` the host forks the child and hands the parent the child's two
pipe ends (an ``opened`` frame carrying them over the Unix socket that is the host's stdout); from then on the parent
and the child talk directly, one round trip per call, with no process between them. The child builds its environment
once and answers each call with the raw ``step`` frame labeling uses (when the task has checks, with their verdicts on
the state after it under ``checks``), so no prefix is ever re-run. ``close`` kills the child, reaps it and removes its
directory. The host holds no session's pipes: a child that dies is seen by its parent as the end of its pipe. In the
shared host (code that is ours or pinned) the parent may start the next session of the same environment code in a child
whose session it closed cleanly (a ``reset`` on the child's pipe: :func:`_session_child`).
"""

from __future__ import annotations

import contextlib
import gc
import inspect
import json
import os
import resource
import shutil
import signal
import socket
import sys
from functools import cache, partial
from typing import Any

from pipeline.core.trajectory import Action
from pipeline.envs import blobs, registry
from pipeline.execution import child as runner
from pipeline.execution import freeze, landlock, pristine, seccomp, worker
from pipeline.execution.frames import encode, read_frame, write_chunks, write_frame
from pipeline.execution.wire import limits_from_wire, trajectory_from_wire

#: the most steps one session may take (its CPU allowance grows with it)
MAX_STEPS = 256
#: the most live sessions one host holds (its process limit; each session is one process)
MAX_SESSIONS = 1024


@cache
def _check_function(code: str) -> tuple[Any, int]:
    """A check code's function and arity (compiled once per session child)."""
    space: dict[str, Any] = {}
    exec(compile(code, "<check_func>", "exec"), space)
    func = space.get("check_func") or next(v for k, v in space.items() if callable(v) and k[:1] != "_")
    return func, len(inspect.signature(func).parameters)


def run_checks(checks: list[str], initial: Any, final: Any) -> list[Any]:
    """Each check function's verdict on the state: ``check_func(final_state)`` or ``check_func(init_state,
    final_state)`` (EnvScaler's ``checklist_with_func``), True/False; a check that raises or answers
    something else gives ``None`` (it counts as failed in the mean). Runs in the session's child: check code is
    corpus data, untrusted like the environment's. Each check gets its own copy of the states."""
    return checks_on_texts(checks, json.dumps(initial), json.dumps(final))


def checks_on_texts(checks: list[str], initial_text: str, final_text: str) -> list[Any]:
    """:func:`run_checks` on the states' JSON texts (a session's snapshots are texts already: each check's copy is
    parsed from them, with no state encoded again per step)."""
    out: list[Any] = []
    for code in checks:
        try:
            func, params = _check_function(code)
            final_copy = json.loads(final_text)
            verdict = func(json.loads(initial_text), final_copy) if params >= 2 else func(final_copy)
            out.append(bool(verdict) if isinstance(verdict, (bool, int, float)) else None)
        except Exception:
            out.append(None)
    return out


def _session_child(out: int, requests: int, request: dict[str, Any], temp_dir: str) -> None:
    """One session's environment, live: built once, then one ``call`` request at a time until EOF. In the shared
    host (code that is ours or pinned) a ``reset`` request starts the next session in the same child, as labeling
    reuses a warm child: the preloaded modules' state put back (:mod:`pipeline.execution.pristine`), a fresh
    directory, the frozen clock and seeds re-targeted, the environment built again."""
    worker._close_inherited()
    limits = limits_from_wire(request["limits"])
    trajectory = trajectory_from_wire(request["trajectory"])
    cpu = int(max(30.0, limits.call_timeout_s * (MAX_STEPS + 20))) * max(1, int(request.get("reuses") or 1))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
    blobs.retain_only(registry.blob_refs(trajectory.env))  # only its own environment's code
    registry.clear_caches()
    landlock.restrict(temp_dir)
    seccomp.install()
    worker._limit_child(limits)
    inbox = os.fdopen(requests, "rb")
    number = 0
    while True:
        worker._enter(temp_dir, number)
        if number:
            shutil.rmtree(os.path.join(temp_dir, f"t{number - 1}"), ignore_errors=True)
            pristine.restore()
            gc.collect()
        freeze.install_for(trajectory)
        request = _session(out, inbox, request, trajectory, limits)
        if request is None or worker._INSTANCE:  # corpus code never serves a second session
            return
        trajectory = trajectory_from_wire(request["trajectory"])
        number += 1


def _session(out: int, inbox: Any, request: dict[str, Any], trajectory: Any, limits: Any) -> dict[str, Any] | None:
    """One session in the child: its environment built, ``init`` sent, then its calls; the next session's
    ``reset`` request, or None (EOF, or an environment that did not start)."""
    send = partial(write_frame, out)
    try:
        env = registry.build(trajectory.env)
        snapshots = runner._Snapshots(env, limits.max_state_mb << 20)
        initial_text = snapshots.take()
    except Exception as exc:
        send({"kind": "init_error", "error": f"{type(exc).__name__}: {str(exc)[:2000]}"})
        return None
    checks = [c for c in request.get("checks") or [] if isinstance(c, str)]
    initial = initial_text or "null"
    # the checks' verdicts on the initial state: the reward of an episode before (or without) a valid call
    verdicts = {"checks": checks_on_texts(checks, initial, initial)} if checks else {}
    send({"kind": "init", "state": initial_text, **verdicts})
    judged = initial_text, verdicts.get("checks")  # the state the checks last ran on, and their verdicts
    while (msg := read_frame(inbox, max_size=1 << 30)) is not None:
        if msg.get("kind") == "reset":
            return msg
        index = int(msg["step_index"])
        action = Action(str(msg["tool"]), dict(msg["arguments"]), index)
        step = runner._call(env, index, action, snapshots, limits)
        if checks:
            if snapshots.text != judged[0]:  # a call that left the state as it was keeps its verdicts
                judged = snapshots.text, checks_on_texts(checks, initial, snapshots.text or "null")
            step["checks"] = judged[1]  # the verdicts ride in the step's own frame: one frame, one wake per call
        write_chunks(out, [encode(step)])
    return None


class Host:
    """The host's sessions and its loop (see the module docstring): each live session's child pid and directory."""

    def __init__(self, proto_in: Any, proto_out: int) -> None:
        self.requests = proto_in
        self.out = socket.socket(fileno=proto_out)  # a Unix socket: a child's pipe ends travel over it
        self.live: dict[str, tuple[int, str]] = {}

    def emit(self, sid: str, msg: dict[str, Any], fds: tuple[int, ...] = ()) -> None:
        data = encode({**msg, "trajectory_id": sid})
        sent = socket.send_fds(self.out, [data], list(fds)) if fds else 0
        self.out.sendall(data[sent:])

    def open(self, request: dict[str, Any]) -> None:
        sid = str(request["session"])
        if request.get("blobs"):
            blobs.update(request["blobs"])
        trajectory = trajectory_from_wire(request["trajectory"])
        if ref := trajectory.env.options.get("code_ref"):
            worker._precompile(ref, f"<env {trajectory.env_id}>")  # once here: every later child inherits it
        temp_dir = worker._named(trajectory)  # a name from the episode: reproducible
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
        self.live[sid] = pid, temp_dir
        try:
            self.emit(sid, {"kind": "opened"}, (rfd, req_w))
        finally:
            os.close(rfd)
            os.close(req_w)

    def end(self, sid: str) -> None:
        """End a session's child (killed, reaped, its directory removed)."""
        pid, temp_dir = self.live.pop(sid)
        worker._kill(pid)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
        worker._remove_tree(temp_dir)
        worker._LIVE.discard(temp_dir)

    def serve(self) -> None:
        while (request := read_frame(self.requests, max_size=1 << 30)) is not None:
            sid, kind = str(request.get("session")), request.get("kind")
            if kind == "open":
                try:
                    self.open(request)
                except OSError as exc:  # out of processes or descriptors: this session only
                    self.emit(sid, {"kind": "init_error", "error": f"the session host cannot start another ({exc})"})
            elif kind == "close" and sid in self.live:
                self.end(sid)
        for sid in list(self.live):
            self.end(sid)


def main() -> None:
    proto_in, proto_out, confinement = worker.prepare(sys.argv[1:], reuse=True, processes=MAX_SESSIONS + 16)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    write_frame(proto_out, {"kind": "ready", "pid": os.getpid(), "landlock": confinement})
    Host(proto_in, proto_out).serve()
    if worker._ROOT and worker._ROOT[0] != "/tmp/work":
        worker._remove_tree(worker._ROOT[0])


if __name__ == "__main__":
    sys.exit(main())
