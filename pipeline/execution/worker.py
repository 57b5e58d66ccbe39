"""Sandbox worker ("zygote"): ``python -m pipeline.execution.worker``, started inside ``bwrap``.

It imports the environment modules once, then runs every trajectory in a forked child under its limits,
Landlock, the seccomp filter and the frozen clock, forwarding the child's frames tagged with the trajectory id.
A call that hangs, kills its child or sends malformed data becomes a ``lost`` frame and a fresh child resumes
after it. Corpus code runs each trajectory in a fresh child (a spare forked ahead by :func:`_zygote`); our own
or pinned code (:func:`pipeline.envs.registry.reuse_key`) may share a warm child (docs/environments.md, "Sandbox").
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import itertools
import json
import os
import resource
import select
import signal
import socket
import stat
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any, NoReturn

from pipeline.core.trajectory import Trajectory
from pipeline.envs import blobs, envscaler, registry
from pipeline.execution import freeze, landlock, pristine, seccomp
from pipeline.execution.child import Limits, describe_exit, execute
from pipeline.execution.frames import FdReader, FrameError, read_frame, write_chunks, write_frame
from pipeline.execution.wire import limits_from_wire, limits_to_wire, max_frame, trajectory_from_wire

_MIB = 1 << 20


_BASE_VSIZE: list[int] = []  # the worker's address space before it forks: a child starts with the same
_PROTOCOL_FDS: list[int] = []
_PROTOCOL_FILES: list[Any] = []  # the buffered request reader: closed (its buffer freed) in every child


def _enter(temp_dir: str, number: int) -> None:
    """A fresh directory for the trajectory ``number`` of this child: its cwd, TMPDIR and HOME."""
    path = os.path.join(temp_dir, f"t{number}")
    os.mkdir(path, 0o700)
    os.chdir(path)
    os.environ["TMPDIR"] = os.environ["HOME"] = path
    tempfile.tempdir = path
    tempfile._name_sequence = None  # type: ignore[attr-defined]


_ROOT: list[str] = []  # where children's directories live: /tmp/work in a bwrap instance's own tmpfs
_GONE = itertools.count(1)  # numbers the names of buried and spare directories
_LIVE: set[str] = set()  # directories of running children: never buried by another trajectory's claim


def _root() -> str:
    """Where children's directories are made: ``/tmp/work`` inside bwrap (the same on every run), else a fresh
    temporary directory."""
    if not _ROOT:
        if "--private-tmp" in sys.argv[1:]:
            os.makedirs("/tmp/work", 0o700, exist_ok=True)
            _ROOT.append("/tmp/work")
        else:
            _ROOT.append(tempfile.mkdtemp(prefix="envsim-sandbox-"))
    return _ROOT[0]


def _named(trajectory: Trajectory) -> str:
    """The directory of ``trajectory``'s child, named from its id alone, so a state that stores its cwd or a
    temporary path labels the same on every run and machine."""
    digest = hashlib.sha256(trajectory.trajectory_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    path, n = os.path.join(_root(), f"t-{digest}"), 0
    while path in _LIVE:  # the same trajectory running beside it (two rollouts of one task): a name of its own
        n += 1
        path = os.path.join(_root(), f"t-{digest}-{n}")
    _LIVE.add(path)
    return path


def _bury(path: str) -> str:
    """Move a directory out of the way (its name is free at once); the new path."""
    grave = os.path.join(_root(), f".gone-{next(_GONE)}")
    try:
        os.chmod(path, 0o700)
        os.rename(path, grave)
    except OSError:
        return path
    return grave


def _claim(path: str) -> None:
    """Make ``path`` free for a new child's directory (a leftover of the same trajectory is buried)."""
    _restore_modes()
    if os.path.lexists(path):
        _remove_tree(_bury(path))


def _restore_modes() -> None:
    """In an instance, give ``/tmp`` and the children's root their modes back (a child of the same uid may
    ``chmod`` them; Landlock does not cover it) before a directory is made there."""
    if _ROOT == ["/tmp/work"]:
        for path, mode in (("/tmp", 0o1777), ("/tmp/work", 0o700)):
            with contextlib.suppress(OSError):
                os.chmod(path, mode)


def _remove_tree(path: str, keep_top: bool = False) -> None:
    """Remove what a child left, whatever it did: modes restored before reading, every subdirectory moved up
    next to ``path`` first (a loop, not a recursion; no path grows). ``keep_top``: only empty ``path``."""
    stack, seen = [path], []
    while stack:
        directory = stack.pop()
        try:
            os.chmod(directory, 0o700)
            names = os.listdir(directory)
        except OSError:
            names = []
        for name in names:
            entry = os.path.join(directory, name)
            with contextlib.suppress(OSError):
                if stat.S_ISDIR(os.lstat(entry).st_mode):
                    stack.append(_bury(entry))
                else:
                    os.unlink(entry)
        seen.append(directory)
    for directory in reversed(seen[1:] if keep_top else seen):
        with contextlib.suppress(OSError):
            os.rmdir(directory)


def _close_inherited() -> None:
    """In a new child: close the worker's protocol and every other child's pipes, stderr to /dev/null."""
    for reader in _PROTOCOL_FILES:
        reader.close()  # the fd and the read-ahead buffer (which may hold later requests)
    for pfd in _PROTOCOL_FDS + _WARM_FDS + _SPARE_FDS + _ZYGOTE_SIDE:
        with contextlib.suppress(OSError):
            os.close(pfd)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 2)


def _limit_child(limits: Limits) -> None:
    """A child's address space: its base plus ``memory_mb`` (file size and the rest: the worker's, inherited)."""
    memory = _BASE_VSIZE[0] + limits.memory_mb * _MIB
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))


def _cpu_limit(trajectory: Trajectory, limits: Limits, uses: int = 1) -> None:
    cpu = int(max(30.0, limits.call_timeout_s * (len(trajectory.actions) + 20))) * uses
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))


def _child(
    fd: int,
    trajectory: Trajectory,
    limits: Limits,
    start: int,
    skip: frozenset[int],
    temp_dir: str,
    requests: int | None = None,
) -> None:
    """Run one trajectory; with a ``requests`` pipe (a warm child), then the next ones sent on it, until EOF."""
    _close_inherited()
    _cpu_limit(trajectory, limits, limits.reuse_children if requests is not None else 1)
    blobs.retain_only(registry.blob_refs(trajectory.env))  # only its own environment's code
    registry.clear_caches()
    landlock.restrict(temp_dir)  # writes only beneath its own directory, by the kernel
    seccomp.install()
    _limit_child(limits)
    _enter(temp_dir, 0)
    freeze.install_for(trajectory)
    send = partial(write_frame, fd)
    execute(trajectory, send, limits, start, skip)
    if requests is not None:
        inbox = os.fdopen(requests, "rb")
        number = 0
        while (request := read_frame(inbox, max_size=1 << 30)) is not None:
            number += 1
            _enter(temp_dir, number)  # the previous one was emptied by the worker
            pristine.restore()  # preloaded modules' state back to what the worker imported
            gc.collect()
            nxt = trajectory_from_wire(request["trajectory"])
            freeze.install_for(nxt)  # re-targets the frozen clock and seeds (rebinds nothing)
            execute(nxt, send, limits)


def _exit_after(fd: int, child: Callable[[], None]) -> NoReturn:
    """Run ``child`` in a forked child, then exit (1 after a last ``fatal`` frame when it raised)."""
    code = 0
    try:
        child()
    except BaseException as exc:
        code = 1
        with contextlib.suppress(BaseException):
            write_frame(fd, {"kind": "fatal", "error": f"{type(exc).__name__}: {str(exc)[:2000]}"})
    finally:
        os._exit(code)


def _prepared_child(fd: int, requests: int, temp_dir: str, limits: Limits, dir_fd: int) -> None:
    """A spare: everything a fresh child does before environment code runs, then it waits on ``requests`` for
    one trajectory (its directory renamed to the trajectory's first), runs it and exits."""
    _close_inherited()
    registry.clear_caches()
    landlock.restrict(dir_fd)  # its directory by descriptor: the worker may rename it any time now
    os.close(dir_fd)
    seccomp.install()
    _limit_child(limits)
    freeze.install("", 0, None)  # patched now; re-targeted to its trajectory below
    request = read_frame(os.fdopen(requests, "rb"), max_size=1 << 30)
    if request is not None:
        _enter(str(request.get("dir") or temp_dir), 0)
        trajectory = trajectory_from_wire(request["trajectory"])
        blobs.retain_only(registry.blob_refs(trajectory.env))  # only its own environment's code
        _cpu_limit(trajectory, limits)
        freeze.install_for(trajectory)
        execute(trajectory, partial(write_frame, fd), limits)


_ZYGOTE: list[Any] = []  # [pid, command fd, socket] of the spare zygote (empty: no spares)
_ZYGOTE_SIDE: list[int] = []  # in the zygote: its own channel's fds (closed in every spare)
_INSTANCE: list[bool] = []  # [True]: this worker is one environment's sandbox instance (``--preload``)
#: how long the worker waits for the zygote to hand a spare over (a module body it runs counts: :func:`_prerun`)
SPARE_WAIT_S = 120.0


def _start_zygote() -> None:
    """Fork the process spares are forked from (:func:`_zygote`; docs/performance.md); without it, no spares."""
    if os.uname().machine not in _SYS_CLONE:
        return
    try:
        cmd_r, cmd_w = os.pipe()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    except OSError:
        return
    pid = os.fork()
    if pid == 0:
        os.close(cmd_w)
        ours.close()
        _zygote(cmd_r, theirs)
    os.close(cmd_r)
    theirs.close()
    ours.settimeout(SPARE_WAIT_S)  # a zygote stuck in a module body: no spares, fresh forks instead
    _ZYGOTE[:] = [pid, cmd_w, ours]
    _PROTOCOL_FDS.extend([cmd_w, ours.fileno()])  # closed in every child the worker forks itself


def _lose_zygote() -> None:
    """The zygote is gone (or stuck): no more spares; its fds closed and forgotten (a later child must not
    close a descriptor that reused their numbers)."""
    if not _ZYGOTE:
        return
    _, cmd_w, sock = _ZYGOTE
    _ZYGOTE.clear()
    for fd in (cmd_w, sock.fileno()):
        if fd in _PROTOCOL_FDS:
            _PROTOCOL_FDS.remove(fd)
    with contextlib.suppress(OSError):
        os.close(cmd_w)
    sock.close()


def _zygote(commands: int, sock: socket.socket) -> None:
    """The zygote's loop: code blobs to hold, spares to fork as the worker's children (their pids and pipes go
    back over ``sock``). It never sees a trajectory."""
    code = 0
    try:
        _close_inherited()
        for held in (_PROTOCOL_FILES, _PROTOCOL_FDS, _WARM_FDS, _SPARE_FDS):
            held.clear()
        _ZYGOTE_SIDE.extend([commands, sock.fileno()])
        freeze.install("", 0, None)  # patched once here: a spare only re-targets the clock, its pages stay shared
        inbox = os.fdopen(commands, "rb")
        while (msg := read_frame(inbox, max_size=1 << 30)) is not None:
            if msg["kind"] == "blobs":
                blobs.update(msg["blobs"])
                for ref, filename in msg["code"]:
                    _precompile(ref, filename)
                    if msg.get("run"):
                        _prerun(ref, filename, limits_from_wire(msg["run"]))
                continue
            rfd, wfd = os.pipe()
            req_r, req_w = os.pipe()
            dir_fd = os.open(msg["temp_dir"], os.O_PATH | os.O_DIRECTORY)
            spare = _fork_for_worker()
            if spare == 0:
                os.close(rfd)
                os.close(req_w)
                limits = limits_from_wire(msg["limits"])
                _exit_after(wfd, partial(_prepared_child, wfd, req_r, msg["temp_dir"], limits, dir_fd))
            os.close(dir_fd)
            os.close(wfd)
            os.close(req_r)
            if spare < 0:
                raise OSError(f"clone failed: errno {-spare}")
            socket.send_fds(sock, [spare.to_bytes(8, "big")], [rfd, req_w])
            os.close(rfd)
            os.close(req_w)
    except BaseException:
        code = 1
    finally:
        os._exit(code)


_CLONE_PARENT, _SYS_CLONE = 0x00008000, {"x86_64": 56, "aarch64": 220}


def _fork_for_worker() -> int:
    """``fork`` whose child is the worker's, not the zygote's (``clone(CLONE_PARENT)``): the worker reaps it."""
    import ctypes

    libc = ctypes.PyDLL(None, use_errno=True)  # the GIL stays held across the call
    api = ctypes.pythonapi
    api.PyOS_BeforeFork()
    pid = libc.syscall(_SYS_CLONE[os.uname().machine], _CLONE_PARENT | signal.SIGCHLD, 0, 0, 0, 0)
    if pid == 0:
        api.PyOS_AfterFork_Child()
        return 0
    api.PyOS_AfterFork_Parent()
    return pid if pid > 0 else -ctypes.get_errno()


def _share_code(new: dict[str, str], trajectory: Trajectory, limits: Limits) -> None:
    """Blobs that arrived: the trajectory's code compiled here and both given to the zygote (in an instance, which
    also runs the module body once: :func:`_prerun`)."""
    ref = trajectory.env.options.get("code_ref")
    code = [[ref, f"<env {trajectory.env_id}>"]] if ref and ref in new else []
    for ref, filename in code:
        _precompile(ref, filename)
    msg: dict[str, Any] = {"kind": "blobs", "blobs": new, "code": code}
    if _INSTANCE and code:
        msg["run"] = limits_to_wire(limits)
    try:
        if _ZYGOTE:
            write_frame(_ZYGOTE[1], msg)
    except OSError:
        _lose_zygote()


def _prerun(ref: str, filename: str, limits: Limits) -> None:
    """In one environment's zygote: run its code's module body, so every later spare starts with it
    (:func:`pipeline.envs.blobs.keep_ran`).

    It runs as in a child: frozen clock, Landlock, the child's memory allowance and the call's time limit (past
    it, or with a thread started, the zygote ends). It runs twice (a library's first import may read the clock);
    if the second run read the clock or drew randomness its namespace is dropped. docs/environments.md
    ("Sandbox") says what the zygote may do that a child may not."""
    statm = os.open("/proc/self/statm", os.O_RDONLY)  # read again below, where Landlock allows no more opens
    try:
        landlock.restrict(_root())
    except landlock.LandlockError:
        os.close(statm)
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    allowance = _vsize(statm) + limits.memory_mb * _MIB
    resource.setrlimit(
        resource.RLIMIT_AS, (allowance if hard == resource.RLIM_INFINITY else min(allowance, hard), hard)
    )
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    signal.alarm(max(1, int(limits.call_timeout_s)))
    namespace, before = None, None
    try:
        for _ in range(2):  # the first run imports what the body imports; the second, as a child runs it, decides
            before = freeze.fingerprint()
            namespace = envscaler.module_namespace(ref, filename)
    except BaseException:
        namespace = None
    finally:
        signal.alarm(0)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    if threading.active_count() > 1:  # a thread it started may hold a lock a forked spare would wait on forever
        raise SystemExit("the module body started a thread: no spares (each child forked by the worker)")
    if namespace is not None and freeze.fingerprint() == before:
        blobs.keep_ran(ref, namespace)
    freeze.install("", 0, None)  # a clock as fresh as before, whatever the body did
    gc.collect()
    gc.freeze()  # the spares' GC never walks (and copies) the module's objects
    _BASE_VSIZE[0] = _vsize(statm)  # a spare's allowance starts from what it inherits
    os.close(statm)


def _vsize(statm: int | None = None) -> int:
    """This process's address space, bytes (``statm``: its ``/proc/self/statm`` open already)."""
    if statm is not None:
        return int(os.pread(statm, 128, 0).split()[0]) * os.sysconf("SC_PAGE_SIZE")
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


class _Spare:
    """A child forked ahead by the zygote and prepared with ``limits`` (:func:`_prepared_child`); it has run no
    environment code (retired when more blobs arrive)."""

    def __init__(self, temp_dir: str, limits: Limits) -> None:
        self.pid: int | None = None
        self.requests: int | None = None
        self.reader: FdReader | None = None
        self.temp_dir, self.limits = temp_dir, limits

    def ready(self) -> bool:
        """Its pid and pipes (from the zygote, the first time); False: it could not be forked."""
        if self.pid is not None:
            return True
        try:
            data, fds, _, _ = socket.recv_fds(_ZYGOTE[2], 8, 2)
        except (OSError, IndexError):
            data, fds = b"", []
        if len(data) != 8 or len(fds) != 2:
            for fd in fds:
                os.close(fd)
            _lose_zygote()
            return False
        self.pid = int.from_bytes(data, "big")
        rfd, self.requests = fds
        self.reader = FdReader(rfd, max_frame(self.limits))
        _SPARE_FDS.extend(fds)
        return True


_SPARES: list[_Spare] = []
_SPARE_FDS: list[int] = []  # the worker's ends of spares' pipes (closed in every new child)
SPARES = 1  # prepared children kept per worker


def _retire_spare(spare: _Spare) -> None:
    """End a spare (it ran nothing); reaped later."""
    _SPARES.remove(spare)
    if spare.ready():
        _end(spare.pid, [spare.requests, spare.reader.fd], spare.temp_dir, _SPARE_FDS)  # type: ignore[arg-type, union-attr]
    else:
        _remove_tree(spare.temp_dir)


def _take_spare(trajectory: Trajectory, limits: Limits, wire: dict[str, Any]) -> _Spare | None:
    """A spare prepared with these limits, handed ``trajectory`` in a directory of its name (None: none);
    spares that cannot run it are retired."""
    for spare in list(_SPARES):
        if spare.limits != limits or not spare.ready():
            _retire_spare(spare)
            continue
        _SPARES.remove(spare)
        for fd in (spare.requests, spare.reader.fd):  # type: ignore[union-attr]
            _SPARE_FDS.remove(fd)  # type: ignore[arg-type]
        named = _named(trajectory)
        _claim(named)
        try:
            os.rename(spare.temp_dir, named)  # its Landlock rule follows the directory, not the name
            spare.temp_dir = named
            write_frame(spare.requests, {"kind": "run", "trajectory": wire, "dir": named})
        except OSError:
            _end(spare.pid, [spare.requests, spare.reader.fd], spare.temp_dir, [])  # type: ignore[arg-type, union-attr]
            continue
        os.close(spare.requests)
        return spare
    return None


def _top_up(limits: Limits) -> None:
    """Have the zygote fork spares for the next trajectories that need a fresh child, each in a new directory."""
    while _ZYGOTE and len(_SPARES) < SPARES:
        temp_dir = os.path.join(_root(), f".spare-{next(_GONE)}")
        _restore_modes()
        os.mkdir(temp_dir, 0o700)
        try:
            write_frame(_ZYGOTE[1], {"kind": "fork", "limits": limits_to_wire(limits), "temp_dir": temp_dir})
        except OSError:
            _lose_zygote()
            _remove_tree(temp_dir)
        else:
            _SPARES.append(_Spare(temp_dir, limits))


_WARM: dict[tuple[str, ...], _Attempt] = {}  # by environment code, least recently used first
_WARM_FDS: list[int] = []  # the parent ends of warm children's pipes (closed in every new child)
MAX_WARM = 32  # warm children per worker (an explore batch cycles through its environments)


def _end(pid: int, fds: list[int | None], temp_dir: str, held: list[int]) -> None:
    """End a child that runs no trajectory: killed, its pipes closed (and dropped from ``held``), reaped later,
    its directory buried now (its name free for the next one)."""
    _kill(pid)
    for fd in fds:
        if fd is not None:
            os.close(fd)
            if fd in held:
                held.remove(fd)
    _LIVE.discard(temp_dir)
    _EXITING.append((pid, _bury(temp_dir)))


def _retire_warm(keep: int = 0) -> None:
    """Retire warm children, least recently used first, until ``keep`` remain."""
    while len(_WARM) > keep:
        warm = _WARM.pop(next(iter(_WARM)))
        _end(warm.pid, [warm.requests, warm.reader.fd], warm.temp_dir, _WARM_FDS)


_EXITING: list[tuple[int, str]] = []


def _kill(pid: int) -> None:
    """Kill a child (it cannot have started a process: the filter refuses ``clone``)."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def _reap(block: bool = False) -> None:
    """Reap ended children and remove their directories; ``block``: wait for each."""
    for entry in list(_EXITING):
        pid, temp_dir = entry
        done, _ = os.waitpid(pid, 0 if block else os.WNOHANG)
        if done:
            _EXITING.remove(entry)
            _remove_tree(temp_dir)


def _scratch_low() -> bool:
    """Whether less than half of the children's file system is free (a dying child may still hold space)."""
    try:
        st = os.statvfs(_root())
    except OSError:
        return False
    return st.f_bavail * 2 < st.f_blocks


def _tagger(trajectory_id: str) -> Any:
    """Forward a child's raw frame to ``out`` with the trajectory id appended to its JSON header (last, so it
    overrides any ``trajectory_id`` the child wrote), its state payload not copied."""
    tag = b',"trajectory_id":' + json.dumps(trajectory_id, ensure_ascii=True).encode()

    def forward(out: int, raw: bytes) -> None:
        end = raw.find(b"\n", 4)  # a state payload follows the JSON header after a newline
        end = len(raw) if end < 0 else end
        close = raw.rfind(b"}", 4, end)
        if close < 0:
            raise ValueError("not a JSON object")
        head = raw[4:close] + tag + raw[close:end]
        write_chunks(out, [(len(head) + len(raw) - end).to_bytes(4, "big") + head, memoryview(raw)[end:]])

    return forward


class _Progress:
    """Where a trajectory stands across its children: actions lost (``skip``), where the next child resumes
    (``start``), and per child the call in flight, checked against every frame."""

    def __init__(self, trajectory: Trajectory) -> None:
        self.actions = len(trajectory.actions)
        self.explore = trajectory.meta.get("explore") is not None
        episode = int(getattr(trajectory.meta.get("explore"), "episode_length", 0) or 0)
        self.max_steps = episode if self.explore else self.actions
        self.skip: set[int] = set()
        self.start = self.restarts = 0
        self.got_init = False
        self.explored = 0  # exploration: steps labeled so far (an episode is not resumed)
        self.new_child()

    def new_child(self) -> None:
        # the call in flight (None while the child resets or replays)
        self.pending: int | None = None
        self.live: int | None = None  # exploration: index of the action the policy is executing
        self.ticks = 0

    def next_action(self, after: int) -> int | None:
        index = after
        while index in self.skip:
            index += 1
        return index if index < self.actions else None

    def check(self, msg: dict[str, Any]) -> tuple[str, str] | None:
        """Update the call in flight from a child frame; a verdict ends the child."""
        kind, start = msg["kind"], self.start
        if kind == "init" and start == 0 and not self.got_init:
            self.got_init = True
            self.pending = self.next_action(0)
        elif kind == "tick" and start > 0 and self.ticks < start:
            self.ticks += 1
        elif kind == "resumed" and start > 0 and self.pending is None and msg["step_index"] == self.next_action(start):
            self.pending = self.next_action(start)
        elif kind == "action" and self.explore and self.live is None and msg["step_index"] == self.explored:
            self.live = msg["step_index"]
            if self.live >= self.max_steps:
                return ("UntrustedData", f"the exploration episode went past {self.max_steps} steps")
        elif kind == "step" and not self.explore and self.pending is not None and msg["step_index"] == self.pending:
            self.pending = self.next_action(self.pending + 1)
            if self.pending is None:
                self.pending = self.actions  # every action labeled: only "done" may follow
        elif kind == "step" and self.explore and self.live is not None and msg["step_index"] == self.live:
            self.live = None
            self.explored += 1
        elif kind in ("init_error", "fatal"):
            return (kind, str(msg.get("error", ""))[:2000])
        elif kind != "done":
            return ("UntrustedData", f"the environment process sent an unexpected {str(kind)[:40]!r} frame")
        return None

    def in_flight(self) -> str:
        if self.pending is None and self.live is None:
            return "environment reset/replay"
        return f"call {self.pending if not self.explore else self.live}"


class _Attempt:
    """A child running (part of) a trajectory (a spare, a warm child or a fresh fork), or waiting warm."""

    def __init__(self, pid: int, reader: FdReader, temp_dir: str, requests: int | None, used: int) -> None:
        self.pid, self.reader, self.temp_dir, self.requests, self.used = pid, reader, temp_dir, requests, used


def _start_child(
    trajectory: Trajectory, limits: Limits, key: tuple[str, ...] | None, progress: _Progress, wire: dict[str, Any]
) -> _Attempt:
    """The child for the next part of ``trajectory``: a warm child of its key, a spare, else a fresh fork."""
    first = progress.start == 0
    spare = _take_spare(trajectory, limits, wire) if first and key is None else None
    if spare is not None:
        return _Attempt(spare.pid, spare.reader, spare.temp_dir, None, 1)  # type: ignore[arg-type]
    warm = _WARM.pop(key, None) if first and key is not None else None
    if warm is not None:
        for fd in (warm.requests, warm.reader.fd):
            _WARM_FDS.remove(fd)
        try:
            write_frame(warm.requests, {"kind": "run", "trajectory": wire})
        except OSError:  # it is gone: a fresh child instead
            _end(warm.pid, [warm.requests, warm.reader.fd], warm.temp_dir, [])
        else:
            warm.used += 1
            return warm
    _retire_warm(keep=MAX_WARM - 1)
    rfd, wfd = os.pipe()
    req_r, requests = os.pipe() if key is not None and first else (None, None)
    temp_dir = _named(trajectory)
    _claim(temp_dir)
    os.mkdir(temp_dir, 0o700)
    pid = os.fork()
    if pid == 0:  # child
        os.close(rfd)
        if requests is not None:
            os.close(requests)
        _exit_after(
            wfd, partial(_child, wfd, trajectory, limits, progress.start, frozenset(progress.skip), temp_dir, req_r)
        )
    os.close(wfd)
    if req_r is not None:
        os.close(req_r)
    return _Attempt(pid, FdReader(rfd, max_frame(limits)), temp_dir, requests, 1)


def _pump(attempt: _Attempt, progress: _Progress, limits: Limits, forward: Any, out: int) -> tuple[str, str] | None:
    """Forward the child's frames until its ``done`` (None) or a failure ``(error type, message)``: a call past
    the time limit (the child is killed), a frame that breaks the protocol, the child's death."""
    reader = attempt.reader
    deadline = time.monotonic() + limits.call_timeout_s
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            _kill(attempt.pid)
            what = progress.in_flight()
            return ("Timeout", f"{what} exceeded the {limits.call_timeout_s:g}s wall-clock limit; worker killed")
        ready, _, _ = select.select([reader.fd], [], [], remaining)
        if not ready:
            continue
        reader.feed()
        while True:
            try:
                frames = reader.frames(with_raw=True)
            except FrameError as exc:
                return ("UntrustedData", f"the environment process sent an invalid frame ({exc})")
            if not frames:
                break
            for msg, raw in frames:
                try:
                    verdict = progress.check(msg)
                except (KeyError, TypeError, ValueError) as exc:
                    verdict = (
                        "UntrustedData",
                        f"the environment process sent a malformed frame ({type(exc).__name__}: {exc})",
                    )
                if verdict is not None:
                    return verdict
                deadline = time.monotonic() + limits.call_timeout_s
                if msg["kind"] == "done":
                    return None
                forward(out, raw)
        if reader.eof:
            return ("WorkerCrash", "")


def _finish_child(attempt: _Attempt, limits: Limits, key: tuple[str, ...] | None) -> None:
    """A child whose trajectory ended, its files removed: kept warm for the next one of its key (under
    ``reuse_children``), else killed, its teardown overlapping the next trajectory."""
    pid, requests, rfd = attempt.pid, attempt.requests, attempt.reader.fd
    _remove_tree(attempt.temp_dir, keep_top=True)
    if requests is not None and attempt.used < limits.reuse_children:
        _WARM[key] = attempt  # type: ignore[index]
        _WARM_FDS.extend([requests, rfd])
        return
    _end(pid, [rfd, requests], attempt.temp_dir, [])


def _lose_child(attempt: _Attempt, progress: _Progress, failure: tuple[str, str], limits: Limits, emit: Any) -> bool:
    """A child that failed: killed, reaped, its directory removed, the failure reported. True: resume the
    trajectory after the lost call in a fresh child."""
    _kill(attempt.pid)
    for fd in (attempt.reader.fd, attempt.requests):
        if fd is not None:
            os.close(fd)
    _, status = os.waitpid(attempt.pid, 0)
    _remove_tree(attempt.temp_dir)
    kind, message = failure
    if kind == "WorkerCrash":
        message = (
            "worker process "
            + describe_exit(os.waitstatus_to_exitcode(status))
            + (" (memory limit?)" if os.WIFSIGNALED(status) or os.WEXITSTATUS(status) else "")
        )
    if not progress.got_init:
        emit({"kind": "init_error", "error": f"{kind}: {message}"})
        return False
    if progress.explore:
        # a live episode cannot be rebuilt call by call: it ends with the lost call
        if progress.live is not None:
            emit({"kind": "lost", "step_index": progress.live, "error_type": kind, "error": message})
        emit({"kind": "issue", "message": f"episode ended: {kind}: {message}"})
        return False
    pending = progress.pending
    if pending is None:
        # the failure happened outside a call (replay): nothing to label
        emit({"kind": "issue", "message": f"trajectory truncated: {kind}: {message}"})
        return False
    emit({"kind": "lost", "step_index": pending, "error_type": kind, "error": message})
    progress.skip.add(pending)
    progress.start = pending + 1
    progress.restarts += 1
    if progress.start >= progress.actions:
        return False
    if progress.restarts > limits.max_restarts:
        emit(
            {
                "kind": "issue",
                "message": f"trajectory truncated after step {pending}: more than {limits.max_restarts} lost calls",
            }
        )
        return False
    return True


def supervise(trajectory: Trajectory, limits: Limits, out: int, wire: dict[str, Any]) -> bool:
    """Run a trajectory in forked children, forwarding their frames to ``out``; never raises for env code.
    ``wire``: its wire form as it arrived. True: it started in a fresh (or spare) child, not a warm one."""
    _reap()
    if _EXITING and _scratch_low():
        _reap(block=True)  # what ended children left is gone before the next one starts
    # the warm child it may run in (never corpus code)
    key = registry.reuse_key(trajectory.env) if limits.reuse_children > 1 else None
    forward = _tagger(trajectory.trajectory_id)
    tid = trajectory.trajectory_id

    def emit(msg: dict[str, Any]) -> None:
        write_frame(out, {**msg, "trajectory_id": tid})

    progress = _Progress(trajectory)
    while True:
        attempt = _start_child(trajectory, limits, key, progress, wire)
        progress.new_child()
        failure = _pump(attempt, progress, limits, forward, out)
        if failure is None:
            _finish_child(attempt, limits, key)
            return key is None
        if not _lose_child(attempt, progress, failure, limits, emit):
            return key is None


def _precompile(ref: str, filename: str) -> None:
    """Compile environment code once here, so every forked child inherits it."""
    with contextlib.suppress(Exception):  # the child reports the compile error as a reset failure
        blobs.precompile(ref, filename)


#: stdlib modules environment code often imports lazily: imported before forking, once for every child
PRELOADED_STDLIB = (
    "_strptime",
    "statistics",
    "string",
    "textwrap",
    "fractions",
    "decimal",
    "heapq",
    "bisect",
    "calendar",
    "csv",
    "difflib",
    "dataclasses",
    "enum",
    "itertools",
    "functools",
    "operator",
    "collections.abc",
    "typing",
    "uuid",
    "hashlib",
    "secrets",
    "base64",
    "struct",
    "pprint",
    "zoneinfo",
    "ipaddress",
    "fnmatch",
)


def _preload_stdlib() -> None:
    import importlib

    for name in PRELOADED_STDLIB:
        with contextlib.suppress(Exception):
            importlib.import_module(name)


def _limit_self(processes: int = 256) -> None:
    """Limits of the worker itself (its children inherit them); ``processes``: the most processes of its uid."""
    files = max(1024, 4 * processes)
    freeze.pin_limits({resource.RLIMIT_CORE: 0, resource.RLIMIT_NOFILE: files, resource.RLIMIT_NPROC: processes})
    resource.setrlimit(resource.RLIMIT_FSIZE, (64 * _MIB, 64 * _MIB))
    freeze.pin_limits()  # the rest of what a child could read of the host's limits: constants
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def prepare(args: list[str], reuse: bool = True, processes: int = 256) -> tuple[Any, int, int]:
    """Everything a sandbox process does before it forks: the protocol moved off fds 0/1, its limits, its
    adapter(s) preloaded, seccomp/Landlock/clock preparation, the base filter, the heap frozen. ``args``:
    ``--private-tmp``, ``--preload ADAPTER``. Returns (request file, reply fd, Landlock ABI)."""
    seccomp.non_dumpable()  # first: nothing of the worker is readable by another process of its uid
    proto_in = os.fdopen(os.dup(0), "rb")
    proto_out = os.dup(1)
    _PROTOCOL_FILES.append(proto_in)
    _PROTOCOL_FDS.append(proto_out)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)  # env code that prints must not corrupt the protocol
    _limit_self(processes)
    only = args[args.index("--preload") + 1] if "--preload" in args[:-1] else None  # an instance: only its adapter
    adapter = registry.ADAPTERS.find(only) if only else None
    if adapter is None:
        registry.preload_all()
    else:
        _INSTANCE.append(True)
        with contextlib.suppress(Exception):  # the child's own import then names what fails
            adapter.preload()
    _preload_stdlib()
    seccomp.prepare()
    confinement = landlock.prepare()
    freeze.prepare()
    if adapter is None and reuse:
        pristine.prepare()  # an instance never reuses a child: nothing to restore
    seccomp.install_base()  # no_new_privs and the base filter: every child runs under it
    gc.collect()
    gc.freeze()  # pre-fork: children's GC never walks (and copies) the preloaded heap
    _BASE_VSIZE.append(_vsize())  # the address space a forked child starts with
    _root()  # made before the zygote forks: its children's directories are the worker's
    return proto_in, proto_out, confinement


def main() -> None:
    # from the parent (isolation.worker_command): --private-tmp, --preload ADAPTER
    proto_in, proto_out, confinement = prepare(sys.argv[1:])
    _start_zygote()

    write_frame(proto_out, {"kind": "ready", "pid": os.getpid(), "landlock": confinement})
    while True:
        request = read_frame(proto_in, max_size=1 << 30)  # from the parent: trusted
        if request is None:
            break
        trajectory = trajectory_from_wire(request["trajectory"])
        limits = limits_from_wire(request["limits"])
        if request.get("blobs"):
            blobs.update(request["blobs"])
            for spare in list(_SPARES):
                _retire_spare(spare)  # forked without them
            _share_code(request["blobs"], trajectory, limits)
        fresh = supervise(trajectory, limits, proto_out, request["trajectory"])
        write_frame(proto_out, {"kind": "end", "trajectory_id": trajectory.trajectory_id})
        del trajectory, request  # no trajectory in the memory a spare inherits
        if fresh:
            _top_up(limits)
    _retire_warm()
    for spare in list(_SPARES):
        _retire_spare(spare)
    _reap(block=True)
    if _ROOT and _ROOT[0] != "/tmp/work":
        _remove_tree(_ROOT[0])  # trusted: its host directory (an instance's tmpfs goes with it)


if __name__ == "__main__":
    sys.exit(main())
