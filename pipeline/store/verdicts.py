"""Results kept per content of their inputs: a check that reads the same bytes under the same code gives the same
result, so a resumed or repeated run reads the one the last run wrote instead of computing it again."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from contextlib import suppress
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar

from pipeline.store.layout import DataLayout
from pipeline.store.parquet_io import atomic_path

T = TypeVar("T")
#: the ``pipeline`` package's directory
_PACKAGE = Path(__file__).resolve().parent.parent


def file_digest(path: str | Path) -> str:
    """BLAKE2b (16 bytes) of a file's bytes."""
    with Path(path).open("rb") as fh:
        return hashlib.file_digest(fh, lambda: hashlib.blake2b(digest_size=16)).hexdigest()


def labeled_digests(layout: DataLayout) -> dict[str, list[tuple[str, str]]]:
    """(name, :func:`file_digest`) of every step part and trajectory file of ``layout``: the labeled data a result
    kept by :func:`kept` was computed from."""
    return {
        "parts": [(Path(p).name, file_digest(p)) for p in layout.step_parts()],
        "trajectories": [(Path(p).name, file_digest(p)) for p in layout.trajectory_files()],
    }


@lru_cache(maxsize=8)
def code_digest(packages: tuple[str, ...] = ()) -> str:
    """Digest of the source files of ``pipeline``'s sub-packages ``packages`` (none: the whole package)."""
    h = hashlib.blake2b(digest_size=16)
    for top in [_PACKAGE / p for p in packages] or [_PACKAGE]:
        for path in sorted(top.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix not in (".pyc", ".pyo"):
                h.update(str(path.relative_to(_PACKAGE)).encode())
                h.update(path.read_bytes())
    return h.hexdigest()


def kept(
    path: Path, inputs: Any, compute: Callable[[], T], dump: Callable[[T], Any], load: Callable[[Any, str], T]
) -> T:
    """``compute()``, once per ``inputs`` (a JSON-able value naming what it reads): the result is written to
    ``path`` with the inputs' key, and a later call with the same inputs loads it (``load(stored, key)``)."""
    key = hashlib.blake2b(json.dumps(inputs, sort_keys=True, default=str).encode(), digest_size=16).hexdigest()
    with suppress(OSError, ValueError, KeyError, TypeError):  # none yet, or unreadable: compute
        stored = json.loads(path.read_text())
        if stored.get("key") == key:
            return load(stored["result"], key)
    result = compute()
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps({"key": key, "result": dump(result)}, sort_keys=True, default=str))
    return result
