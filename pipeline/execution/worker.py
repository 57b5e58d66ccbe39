"""Sandbox worker ("zygote"): ``python -m pipeline.execution.worker``.

Started with a fixed hash seed and UTC clock, it imports the environment modules once, then for
every trajectory forks a fresh child (so module-level state never leaks between trajectories),
applies memory/network limits in the child, and supervises it with a wall-clock deadline per
call. A call that hangs or kills its process becomes an ``error`` step; a fresh child rebuilds the
state from the preceding actions and the trajectory goes on.
"""

from __future__ import annotations

import gc
import os
import select
import signal
import shutil
import sys
import tempfile
import time
from typing import Any

from pipeline.collect.trajectory import Action, Trajectory
from pipeline.envs import blobs
from pipeline.execution import guards
from pipeline.execution.frames import FdReader, read_frame, write_frame
from pipeline.execution.runner import Limits, execute

_MIB = 1 << 20


def _address_space() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


_BASE_VSIZE: list[int] = []  # measured once in the zygote; a forked child starts with the same


def _apply_limits(limits: Limits, temp_dir: str) -> None:
    base = _BASE_VSIZE[0] if _BASE_VSIZE else _address_space()
    guards.install(temp_dir, base + limits.memory_mb * _MIB)


_PROTOCOL_FDS: list[int] = []


def _child(
    fd: int, trajectory: Trajectory, limits: Limits, start: int, skip: frozenset[int], expected: str | None, temp_dir: str
) -> None:
    code = 0
    out = os.fdopen(fd, "wb")
    try:
        for pfd in _PROTOCOL_FDS:
            os.close(pfd)
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 2)
        os.setpgid(0, 0)  # its own process group: a kill reaches anything it managed to start
        _apply_limits(limits, temp_dir)
        execute(trajectory, lambda m: write_frame(out, m), limits, start, skip, expected)
        out.flush()
    except BaseException as exc:  # report, then die quietly
        code = 1
        try:
            write_frame(out, {"kind": "fatal", "error": f"{type(exc).__name__}: {exc}"})
        except BaseException:
            pass
    finally:
        os._exit(code)


def _describe_exit(status: int) -> str:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        return f"worker process killed by signal {signal.Signals(sig).name}"
    return f"worker process exited with code {os.WEXITSTATUS(status)}"


def _lost_step(action: Action, index: int, kind: str, message: str, state_hash: str) -> dict[str, Any]:
    from pipeline.labeling.outcome import ERROR, args_count
    from pipeline.state.canonical import canonical_json, canonicalize

    return {
        "kind": "step",
        "step_index": index,
        "turn": action.turn,
        "tool": action.name,
        "arguments_json": canonical_json(canonicalize(action.arguments)),
        "args_count": args_count(action.arguments),
        "raw_observation": f"Error: {message}",
        "observation_json": None,
        "observation_truncated": False,
        "outcome": ERROR,
        "error_type": kind,
        "error_message": message,
        "delta": [],
        "delta_size": 0,
        "state_before_hash": state_hash,
        "state_after_hash": state_hash,
        "call_seconds": None,
        "env_output": None,
    }


_EXITING: list[tuple[int, str]] = []


def _kill_group(pid: int) -> None:
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
            return
        except (ProcessLookupError, PermissionError):
            continue


def _reap() -> None:
    for entry in list(_EXITING):
        pid, temp_dir = entry
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            _EXITING.remove(entry)
            _kill_group(pid)  # anything left in its process group
            shutil.rmtree(temp_dir, ignore_errors=True)


def supervise(trajectory: Trajectory, limits: Limits) -> dict[str, Any]:
    """Run a trajectory in forked children; never raises for anything the env code does."""
    _reap()
    result: dict[str, Any] = {
        "trajectory_id": trajectory.trajectory_id,
        "init": None,
        "init_error": None,
        "steps": [],
        "issues": [],
    }
    skip: set[int] = set()
    start, expected, restarts = 0, None, 0
    last_hash: str | None = None
    while True:
        rfd, wfd = os.pipe()
        temp_dir = tempfile.mkdtemp(prefix="envsim-sandbox-")
        pid = os.fork()
        if pid == 0:  # child
            os.close(rfd)
            _child(wfd, trajectory, limits, start, frozenset(skip), expected, temp_dir)
        os.close(wfd)
        reader = FdReader(rfd)
        # the call in flight is the next unlabeled, unskipped action once the child is past its
        # reset (init) or its silent replay (resumed); None while it is resetting/replaying
        pending: int | None = None
        live_action: Action | None = None  # exploration: the action the policy is executing
        finished = False
        failure: tuple[str, str] | None = None
        deadline = time.monotonic() + limits.call_timeout_s

        def next_action(after: int) -> int | None:
            index = after
            while index in skip:
                index += 1
            return index if index < len(trajectory.actions) else None

        while not finished and failure is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                what = f"call {pending}" if pending is not None else "environment reset/replay"
                failure = ("Timeout", f"{what} exceeded the {limits.call_timeout_s:g}s wall-clock limit; worker killed")
                _kill_group(pid)
                break
            ready, _, _ = select.select([rfd], [], [], remaining)
            if not ready:
                continue
            reader.feed()
            for msg in reader.frames():
                kind = msg["kind"]
                deadline = time.monotonic() + limits.call_timeout_s
                if kind == "init":
                    result["init"] = msg
                    last_hash = msg["state_hash"]
                    pending = next_action(0)
                elif kind == "action":
                    live_action = Action(msg["tool"], msg["arguments"], msg["step_index"])
                elif kind == "resumed":
                    pending = next_action(msg["step_index"])
                elif kind == "step":
                    result["steps"].append(msg)
                    last_hash = msg["state_after_hash"]
                    pending = next_action(msg["step_index"] + 1)
                elif kind == "done":
                    finished = True
                elif kind in ("init_error", "resume_mismatch", "fatal"):
                    failure = (kind, msg["error"])
            if reader.eof and not finished and failure is None:
                failure = ("WorkerCrash", "")
        os.close(rfd)
        if finished:
            _EXITING.append((pid, temp_dir))  # reaped later: its teardown overlaps the next trajectory
            return result
        _kill_group(pid)
        _, status = os.waitpid(pid, 0)
        shutil.rmtree(temp_dir, ignore_errors=True)
        kind, message = failure  # type: ignore[misc]
        if kind == "WorkerCrash":
            message = _describe_exit(status) + (
                " (memory limit?)" if os.WIFSIGNALED(status) or os.WEXITSTATUS(status) else ""
            )
        if result["init"] is None:
            result["init_error"] = f"{kind}: {message}"
            return result
        if trajectory.meta.get("explore") is not None:
            # a live episode cannot be rebuilt call by call: it ends with the lost call
            if live_action is not None and live_action.turn == len(result["steps"]):
                result["steps"].append(_lost_step(live_action, live_action.turn, kind, message, last_hash))
            result["issues"].append(f"episode ended after {len(result['steps'])} steps: {kind}: {message}")
            return result
        if pending is None or last_hash is None:
            # the failure happened outside a call (replay, resume check): nothing to label
            result["issues"].append(f"trajectory truncated: {kind}: {message}")
            return result
        result["steps"].append(_lost_step(trajectory.actions[pending], pending, kind, message, last_hash))
        skip.add(pending)
        start, expected = pending + 1, last_hash
        restarts += 1
        if start >= len(trajectory.actions):
            return result
        if restarts > limits.max_restarts:
            result["issues"].append(
                f"trajectory truncated after step {pending}: more than {limits.max_restarts} lost calls"
            )
            return result


def _precompile(trajectory: Trajectory) -> None:
    """Compile environment code once here, so every forked child inherits the code object."""
    ref = trajectory.env.options.get("code_ref")
    if ref:
        try:
            blobs.compiled(ref, f"<env {trajectory.env_id}>")
        except Exception:
            pass  # the child reports the compile error as a reset failure


def main() -> None:
    proto_in = os.fdopen(os.dup(0), "rb")
    proto_out = os.fdopen(os.dup(1), "wb")
    _PROTOCOL_FDS.extend([proto_in.fileno(), proto_out.fileno()])
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)  # env code that prints must not corrupt the protocol
    from pipeline.envs import registry

    registry.preload_all()
    gc.collect()
    gc.freeze()  # pre-fork: children's GC never walks (and copies) the preloaded heap
    _BASE_VSIZE.append(_address_space())
    write_frame(proto_out, {"kind": "ready", "pid": os.getpid()})
    while True:
        request = read_frame(proto_in)
        if request is None:
            break
        trajectory, limits, new_blobs = request
        if new_blobs:
            blobs.update(new_blobs)
            _precompile(trajectory)
        write_frame(proto_out, supervise(trajectory, limits))


if __name__ == "__main__":
    sys.exit(main())
