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
from typing import Any

_MIB = 1 << 20

_NETWORK = {
    "socket.__new__", "socket.bind", "socket.connect", "socket.getaddrinfo", "socket.gethostbyname",
    "socket.gethostbyaddr", "socket.getnameinfo", "socket.sendto", "socket.sendmsg", "urllib.Request",
}
_PROCESSES = {
    "os.fork", "os.forkpty", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "subprocess.Popen",
    "os.kill", "os.killpg", "pty.spawn", "os.startfile",
}
_NATIVE = {"ctypes.dlopen", "ctypes.dlsym", "ctypes.cdata", "ctypes.call_function"}
_PATH_EVENTS = {  # event -> indices of path arguments that must stay inside the temp dir
    "os.remove": (0,), "os.rmdir": (0,), "os.mkdir": (0,), "os.rename": (0, 1), "os.replace": (0, 1),
    "os.truncate": (0,), "os.chmod": (0,), "os.chown": (0,), "os.link": (0, 1), "os.symlink": (1,),
    "os.utime": (0,), "shutil.rmtree": (0,), "shutil.copyfile": (1,), "shutil.move": (1,),
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


def _inside(path: Any, root: str) -> bool:
    if isinstance(path, int):
        return True  # an already-open descriptor
    try:
        real = os.path.realpath(os.fsdecode(path))
    except (TypeError, ValueError):
        return False
    return real == root or real.startswith(root + os.sep)


def install(temp_dir: str, memory_limit_bytes: int, max_file_bytes: int = 64 * _MIB) -> None:
    """Apply limits and the audit hook to the current (child) process. Irreversible."""
    resource.setrlimit(resource.RLIMIT_AS, (memory_limit_bytes, memory_limit_bytes))
    resource.setrlimit(resource.RLIMIT_FSIZE, (max_file_bytes, max_file_bytes))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an oversized write fails with EFBIG instead
    os.chdir(temp_dir)
    os.environ["TMPDIR"] = temp_dir
    sys.dont_write_bytecode = True
    root = os.path.realpath(temp_dir)

    watched = frozenset({"open"} | _NETWORK | _PROCESSES | _NATIVE | set(_PATH_EVENTS))

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event not in watched:  # fast path: builtins.id etc. fire constantly
            return
        if event == "open":
            path, mode, flags = (tuple(args) + (None, None, None))[:3]
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & _WRITE_FLAGS
            )
            if writing and path is not None and not _inside(path, root):
                raise PermissionError(f"sandbox: writing outside the sandbox directory is not allowed ({path})")
        elif event in _NETWORK:
            raise PermissionError(f"sandbox: network access is disabled ({event})")
        elif event in _PROCESSES:
            raise PermissionError(f"sandbox: creating or signalling processes is disabled ({event})")
        elif event in _NATIVE:
            raise PermissionError(f"sandbox: loading native code is disabled ({event})")
        elif event in _PATH_EVENTS:
            for i in _PATH_EVENTS[event]:
                if i < len(args) and not _inside(args[i], root):
                    raise PermissionError(f"sandbox: {event} outside the sandbox directory is not allowed ({args[i]})")

    sys.addaudithook(hook)
