"""Limits installed in a sandbox child before environment code runs: address space (memory cap) and
file size (RLIMIT_FSIZE); and captured, capped stdout/stderr per call (:class:`CappedOutput`). What a child
may do is the kernel's to refuse (:mod:`pipeline.execution.seccomp`, :mod:`pipeline.execution.landlock`).
"""

from __future__ import annotations

import io
import resource
import signal
import sys

_MIB = 1 << 20


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


def install(memory_limit_bytes: int, max_file_bytes: int = 64 * _MIB) -> None:
    """Apply the limits to the current (child) process. Irreversible."""
    resource.setrlimit(resource.RLIMIT_AS, (memory_limit_bytes, memory_limit_bytes))
    resource.setrlimit(resource.RLIMIT_FSIZE, (max_file_bytes, max_file_bytes))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an oversized write fails with EFBIG instead
    sys.dont_write_bytecode = True
