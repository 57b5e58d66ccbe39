"""Arrow memory that goes back to the operating system: mimalloc keeps freed pages mapped, so the streaming stages
switch to jemalloc with immediate purging (5K samples peak at ~145 instead of ~245 MiB), else the system allocator.
"""

from __future__ import annotations

import os

import pyarrow as pa

_done = False


def use_returning_pool() -> None:
    """jemalloc with immediate purging as Arrow's pool (``pipeline/__init__`` asks for it before
    pyarrow loads; this also covers a process that imported pyarrow first)."""
    global _done
    if _done or os.environ.get("ARROW_DEFAULT_MEMORY_POOL", "jemalloc") != "jemalloc":
        return
    try:
        if pa.default_memory_pool().backend_name != "jemalloc":
            pa.set_memory_pool(pa.jemalloc_memory_pool())
        pa.jemalloc_set_decay_ms(0)
    except NotImplementedError:
        pa.set_memory_pool(pa.system_memory_pool())
    _done = True
