"""Length-prefixed pickle frames over pipes (sandbox wire format)."""

from __future__ import annotations

import os
import pickle
import struct
from typing import Any, BinaryIO

_HEADER = struct.Struct("!I")


def write_frame(fh: BinaryIO, message: Any) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    fh.write(_HEADER.pack(len(data)) + data)
    fh.flush()


def read_frame(fh: BinaryIO) -> Any | None:
    """Read one frame; ``None`` on a clean EOF."""
    header = fh.read(_HEADER.size)
    if not header:
        return None
    if len(header) < _HEADER.size:
        raise EOFError("truncated frame header")
    (size,) = _HEADER.unpack(header)
    data = fh.read(size)
    if len(data) < size:
        raise EOFError("truncated frame body")
    return pickle.loads(data)


class FdReader:
    """Incremental frame reader over a raw fd, for use with ``select``."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buf = bytearray()
        self.eof = False

    def feed(self) -> None:
        chunk = os.read(self.fd, 1 << 20)
        if chunk:
            self.buf += chunk
        else:
            self.eof = True

    def frames(self) -> list[Any]:
        out = []
        while len(self.buf) >= _HEADER.size:
            (size,) = _HEADER.unpack_from(self.buf)
            if len(self.buf) < _HEADER.size + size:
                break
            out.append(pickle.loads(bytes(self.buf[_HEADER.size : _HEADER.size + size])))
            del self.buf[: _HEADER.size + size]
        return out
