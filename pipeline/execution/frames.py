"""Length-prefixed JSON frames over pipes: the sandbox wire format.

Frames are UTF-8 JSON objects behind a 4-byte big-endian length, never pickle, so nothing a sandboxed process
writes can make its reader run code. Readers cap the frame size and read with a deadline.
"""

from __future__ import annotations

import json
import os
import re
import select
import struct
import time
from typing import Any, BinaryIO

_HEADER = struct.Struct("!I")
DEFAULT_MAX_FRAME = 64 << 20  # 64 MiB


class FrameError(RuntimeError):
    """A frame that cannot be read: truncated, oversized, not JSON, or not an object."""


class FrameTimeout(FrameError):
    """No complete frame arrived before the deadline."""


def encode(message: dict[str, Any]) -> bytes:
    """A frame: the JSON header, and a message's ``state`` text after a newline as a raw payload (not escaped
    twice; readers that only route frames never parse it)."""
    state = message.get("state")
    if isinstance(state, str):
        header = json.dumps(
            {k: v for k, v in message.items() if k != "state"}, separators=(",", ":"), ensure_ascii=False
        )
        data = header.encode("utf-8") + b"\n" + state.encode("utf-8")
    else:
        data = json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return _HEADER.pack(len(data)) + data


def write_bytes(fd: int, data: bytes) -> None:
    """All of ``data`` to the pipe ``fd``, unbuffered (a frame as it is encoded, or forwarded raw)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def write_chunks(fd: int, chunks: list[bytes | memoryview]) -> None:
    """Every chunk to the pipe ``fd`` in order, with as few system calls as the pipe takes (``writev``)."""
    views = [memoryview(c) for c in chunks if len(c)]
    while views:
        written = os.writev(fd, views[:1024])
        while written and written >= len(views[0]):
            written -= len(views.pop(0))
        if written:
            views[0] = views[0][written:]


def write_frame(fd: int, message: dict[str, Any]) -> None:
    """One frame to the pipe ``fd``: every frame the sandbox processes write goes through here."""
    write_bytes(fd, encode(message))


class _NonJSON:
    """Stands in for ``NaN``/``Infinity`` while a frame from inside is parsed, so the check can name the field."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


#: deepest nesting of a frame header from inside (its arguments are the deepest part; states travel as text)
MAX_HEADER_DEPTH = 100


def _field(path: list[Any]) -> str:
    return ".".join(str(p) for p in path)[:120] or "(frame)"


def check_untrusted(message: Any, limit: int = MAX_HEADER_DEPTH) -> None:
    """:class:`FrameError` naming the field when a parsed frame from inside holds ``NaN``/``Infinity``, a string
    (key or value) with a lone surrogate, or nests deeper than ``limit``. Iterative."""
    if isinstance(message, dict):  # a state payload is decoded from UTF-8 bytes: it cannot hold one
        stack: list[tuple[Any, list[Any]]] = [
            (v, [k]) for k, v in message.items() if k != "state" or not isinstance(v, str)
        ]
        stack += [(k, ["<key>"]) for k in message]
    else:
        stack = [(message, [])]
    while stack:
        node, path = stack.pop()
        if isinstance(node, str):
            try:
                node.encode("utf-8")
            except UnicodeEncodeError:
                raise FrameError(f"frame field {_field(path)!r} holds a lone surrogate (not UTF-8)") from None
        elif isinstance(node, _NonJSON):
            raise FrameError(f"frame field {_field(path)!r} is {node.name} (not JSON)")
        elif isinstance(node, (dict, list)):
            if len(path) >= limit:
                raise FrameError(f"frame field {_field(path)!r} is nested deeper than {limit} levels")
            if isinstance(node, dict):
                for key, value in node.items():
                    stack.append((key, path + ["<key>"]))
                    stack.append((value, path + [key]))
            else:
                stack.extend((value, path + [i]) for i, value in enumerate(node))


def decode(data: bytes, strict: bool = True) -> dict[str, Any]:
    """The message of a frame body; ``strict`` (every frame from inside the sandbox): checked by
    :func:`check_untrusted`."""
    header, newline, payload = data.partition(b"\n")  # a JSON header never holds a raw newline
    constants: list[_NonJSON] = []
    try:
        message = (
            json.loads(header, parse_constant=lambda name: _flagged(constants, name)) if strict else json.loads(header)
        )
        if newline and isinstance(message, dict):
            if "state" in message:
                raise ValueError("a state both in the header and as payload")
            message["state"] = payload.decode("utf-8")
    except (ValueError, RecursionError) as exc:
        raise FrameError(f"frame is not valid JSON: {str(exc)[:200]}") from None
    if not isinstance(message, dict) or not isinstance(message.get("kind"), str):
        raise FrameError("frame is not a JSON object with a 'kind'")
    if strict and (constants or not _plain(header)):
        check_untrusted(message)  # the walk that names the field (a header none of these could be in is fine)
    return message


#: a surrogate in a UTF-8 header, escaped or raw (a pair is fine: the walk then says so)
_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]|\xed[\xa0-\xbf]")


def _plain(header: bytes) -> bool:
    """Whether :func:`check_untrusted` could find nothing in ``header``: UTF-8 JSON as frames are written, no
    surrogate, fewer brackets than the depth allowed (NaN/Infinity are flagged as they are parsed)."""
    return (
        header[:1] == b"{"
        and b"\x00" not in header
        and header.count(b"[") + header.count(b"{") < MAX_HEADER_DEPTH
        and not ((b"\\u" in header or b"\xed" in header) and _SURROGATE.search(header))  # the regex only if it may
    )


def _flagged(constants: list[_NonJSON], name: str) -> _NonJSON:
    constants.append(_NonJSON(name))
    return constants[-1]


def read_frame(fh: BinaryIO, max_size: int = DEFAULT_MAX_FRAME) -> dict[str, Any] | None:
    """Blocking read of one frame from a trusted peer; ``None`` on a clean EOF."""
    header = fh.read(_HEADER.size)
    if not header:
        return None
    if len(header) < _HEADER.size:
        raise FrameError("truncated frame header")
    (size,) = _HEADER.unpack(header)
    if size > max_size:
        raise FrameError(f"frame of {size} bytes exceeds the {max_size}-byte limit")
    data = fh.read(size)
    if len(data) < size:
        raise FrameError("truncated frame body")
    return decode(data, strict=False)


def ready(fd: int, event: int, seconds: float) -> bool:
    """Whether ``fd`` is ready for ``event`` within ``seconds`` (``poll``: any descriptor number works)."""
    if seconds <= 0:
        return False
    poller = select.poll()
    poller.register(fd, event)
    return bool(poller.poll(seconds * 1000))


#: the most one read takes from a pipe: its whole buffer, below the size at which malloc maps fresh pages per read
READ_BYTES = 1 << 16


class FdReader:
    """Incremental, size-capped frame reader over a raw fd (non-blocking use with ``select``)."""

    def __init__(self, fd: int, max_size: int = DEFAULT_MAX_FRAME) -> None:
        self.fd = fd
        self.max_size = max_size
        self.buf = bytearray()
        self.eof = False
        self._pending: list[dict[str, Any]] = []

    def feed(self) -> None:
        chunk = os.read(self.fd, READ_BYTES)
        if chunk:
            self.buf += chunk
        else:
            self.eof = True

    def frames(self, with_raw: bool = False) -> list[Any]:
        """Complete frames in the buffer (``with_raw``: ``(message, frame bytes)`` pairs); a bad frame raises after
        the good ones before it were returned."""
        out: list[Any] = []
        while len(self.buf) >= _HEADER.size:
            (size,) = _HEADER.unpack_from(self.buf)
            try:
                if size > self.max_size:
                    raise FrameError(f"frame of {size} bytes exceeds the {self.max_size}-byte limit")
                if len(self.buf) < _HEADER.size + size:
                    break
                message = decode(bytes(self.buf[_HEADER.size : _HEADER.size + size]))
            except FrameError:
                if out:
                    return out  # the bad frame stays in the buffer: the next call raises
                raise
            out.append((message, bytes(self.buf[: _HEADER.size + size])) if with_raw else message)
            del self.buf[: _HEADER.size + size]
        return out

    def next(self, timeout: float) -> dict[str, Any] | None:
        """The next frame within ``timeout`` seconds; ``None`` on EOF; :class:`FrameTimeout` after."""
        deadline = time.monotonic() + timeout
        pending = self._pending
        while not pending:
            pending.extend(self.frames())
            if pending:
                break
            if self.eof:
                if self.buf:
                    raise FrameError("truncated frame at end of stream")
                return None
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise FrameTimeout(f"no frame within {timeout:g}s")
            if ready(self.fd, select.POLLIN, remaining):
                self.feed()
        return pending.pop(0)
