"""Guards installed in a sandbox child before environment code runs.

* resource limits: address space (memory cap), file size (RLIMIT_FSIZE);
* a PEP 578 audit hook — irreversible for the life of the process — that refuses network access,
  process creation (fork bombs, shell-outs), native-code loading (ctypes) and any file write,
  removal or rename outside the child's private temporary directory (its working directory);
* captured, capped stdout/stderr per call (:class:`CappedOutput`).

Each violation raises ``PermissionError("sandbox: …")`` inside the environment code, so the call
becomes an ``error`` step that says what was attempted.
"""

from __future__ import annotations

import io
import os
import resource
import signal
import sys
import types
from typing import Any

_MIB = 1 << 20

_NETWORK = {
    "socket.__new__",
    "socket.bind",
    "socket.connect",
    "socket.getaddrinfo",
    "socket.gethostbyname",
    "socket.gethostbyaddr",
    "socket.getnameinfo",
    "socket.sendto",
    "socket.sendmsg",
    "urllib.Request",
}
_PROCESSES = {
    "os.fork",
    "os.forkpty",
    "os.system",
    "os.exec",
    "os.posix_spawn",
    "os.spawn",
    "subprocess.Popen",
    "os.kill",
    "os.killpg",
    "pty.spawn",
    "os.startfile",
}
_NATIVE = {"ctypes.dlopen", "ctypes.dlsym", "ctypes.cdata", "ctypes.call_function"}
_PATH_EVENTS = {  # event -> indices of path arguments that must stay inside the temp dir
    "os.remove": (0,),
    "os.rmdir": (0,),
    "os.mkdir": (0,),
    "os.rename": (0, 1),
    "os.replace": (0, 1),
    "os.truncate": (0,),
    "os.chmod": (0,),
    "os.chown": (0,),
    "os.link": (0, 1),
    "os.symlink": (1,),
    "os.utime": (0,),
    "shutil.rmtree": (0,),
    "shutil.copyfile": (1,),
    "shutil.move": (1,),
}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


class OutputLimitExceeded(RuntimeError):
    """Environment code printed more than the sandbox allows."""


class CappedOutput(io.TextIOBase):
    """A text stream that keeps the first ``limit`` characters and raises past them."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.parts: list[str] = []
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if self.size + len(text) > self.limit:
            keep = self.limit - self.size
            if keep > 0:
                self.parts.append(text[:keep])
                self.size = self.limit
            raise OutputLimitExceeded(f"sandbox: output limit of {self.limit} characters exceeded")
        self.parts.append(text)
        self.size += len(text)
        return len(text)

    def getvalue(self) -> str:
        return "".join(self.parts)


#: the events the hook looks at (a frozenset: immutable)
WATCHED = frozenset({"open", "object.__setattr__"} | _NETWORK | _PROCESSES | _NATIVE | set(_PATH_EVENTS))
#: attributes of the hook function itself it refuses to let anyone set (its code, its bound policy)
_OWN = frozenset({"__code__", "__defaults__", "__kwdefaults__"})


def make_hook(root: str) -> Any:
    """The audit hook for a child whose directory is ``root``.

    Env code cannot switch it off: everything it uses is bound as a positional default (an immutable
    tuple) or a constant of its code — immutable sets and tuples, builtins, ``root`` — so it reads no
    closure cell, no global and no dict that code could rebind or fill; replacing its ``__code__`` or
    ``__defaults__`` raises an ``object.__setattr__`` audit event, which it refuses. (The path check follows
    ``os.path.realpath``, a Python function env code can patch: writes are confined by Landlock, not by
    this hook — the hook is a convenience, not the boundary.)"""
    path_events = tuple(_PATH_EVENTS.items())

    def hook(
        event: str,
        args: tuple[Any, ...],
        _watched: frozenset[str] = WATCHED,
        _root: str = root,
        _network: frozenset[str] = frozenset(_NETWORK),
        _processes: frozenset[str] = frozenset(_PROCESSES),
        _native: frozenset[str] = frozenset(_NATIVE),
        _paths: tuple[Any, ...] = path_events,
        _own: frozenset[str] = _OWN,
        _flags: int = _WRITE_FLAGS,
        _realpath: Any = os.path.realpath,
        _fsdecode: Any = os.fsdecode,
        _sep: str = os.sep,
        _int: type = int,
        _str: type = str,
        _isinstance: Any = isinstance,
        _type: type = type,
        _len: Any = len,
        _tuple: type = tuple,
        _function: type = types.FunctionType,
        _getframe: Any = sys._getframe,
        _refused: type = PermissionError,
    ) -> None:
        if event not in _watched:  # fast path: builtins.id etc. fire constantly
            return

        def inside(path: Any) -> bool:
            if _isinstance(path, _int):
                return True  # an already-open descriptor
            try:
                real = _realpath(_fsdecode(path))
            except (TypeError, ValueError):
                return False
            return real == _root or real.startswith(_root + _sep)

        if event == "open":
            path, mode, flags = (_tuple(args) + (None, None, None))[:3]
            writing = (_isinstance(mode, _str) and ("w" in mode or "a" in mode or "x" in mode or "+" in mode)) or (
                _isinstance(flags, _int) and flags & _flags
            )
            if writing and path is not None and not inside(path):
                raise _refused(f"sandbox: writing outside the sandbox directory is not allowed ({path})")
        elif event == "object.__setattr__":
            if (
                _len(args) >= 2
                and args[1] in _own
                and _type(args[0]) is _function
                and args[0].__code__ is _getframe(0).f_code
            ):
                raise _refused("sandbox: the sandbox's audit hook cannot be changed")
        elif event in _network:
            raise _refused(f"sandbox: network access is disabled ({event})")
        elif event in _processes:
            raise _refused(f"sandbox: creating or signalling processes is disabled ({event})")
        elif event in _native:
            raise _refused(f"sandbox: loading native code is disabled ({event})")
        else:
            for name, indices in _paths:
                if name == event:
                    for i in indices:
                        if i < _len(args) and not inside(args[i]):
                            raise _refused(f"sandbox: {event} outside the sandbox directory is not allowed ({args[i]})")

    return hook


def install(temp_dir: str, memory_limit_bytes: int, max_file_bytes: int = 64 * _MIB) -> None:
    """Apply limits and the audit hook (:func:`make_hook`) to the current (child) process. Irreversible."""
    resource.setrlimit(resource.RLIMIT_AS, (memory_limit_bytes, memory_limit_bytes))
    resource.setrlimit(resource.RLIMIT_FSIZE, (max_file_bytes, max_file_bytes))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an oversized write fails with EFBIG instead
    os.chdir(temp_dir)
    os.environ["TMPDIR"] = temp_dir
    sys.dont_write_bytecode = True
    sys.addaudithook(make_hook(os.path.realpath(temp_dir)))
