"""Content-addressed text blobs (environment class code, tool schemas) shared with sandbox workers.

Trajectory specs carry only a blob *reference*; the sandbox ships each blob to a worker once, and
the worker compiles code once, before forking (:func:`precompile`), so every child inherits it — as
``marshal`` bytes: a child loads its own environment's code in microseconds and frees every other's as
one object each (freeing code objects a forked child inherited costs a copied page per object).
"""

from __future__ import annotations

import hashlib
import marshal
from collections.abc import Iterable
from pathlib import Path

_BLOBS: dict[str, str] = {}
_COMPILED: dict[str, object] = {}
_MARSHALED: dict[str, bytes] = {}  # compiled code as marshal bytes (:func:`precompile`)
_RAN: dict[str, dict] = {}  # the namespace of code that already ran, by ref (:func:`keep_ran`)


def ref_of(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=12).hexdigest()


def put(text: str) -> str:
    ref = ref_of(text)
    _BLOBS.setdefault(ref, text)
    return ref


def get(ref: str) -> str:
    try:
        return _BLOBS[ref]
    except KeyError:
        raise KeyError(f"unknown code/tools blob {ref!r} (is the environment catalog materialized?)") from None


def update(blobs: dict[str, str]) -> None:
    _BLOBS.update(blobs)


def compiled(ref: str, filename: str) -> object:
    """``compile()`` of a code blob, cached per process. ``dont_inherit``: the code gets none of this
    module's ``__future__`` flags (``annotations`` would turn its annotations into strings)."""
    if ref not in _COMPILED:
        data = _MARSHALED.get(ref)
        _COMPILED[ref] = marshal.loads(data) if data is not None else _compile(ref, filename)
    return _COMPILED[ref]


def _compile(ref: str, filename: str) -> object:
    return compile(get(ref), filename, "exec", dont_inherit=True)


def precompile(ref: str, filename: str) -> None:
    """Compile a code blob once and keep it as marshal bytes (the sandbox worker, before forking);
    :func:`compiled` loads it. Raises the compile error."""
    if ref not in _MARSHALED:
        _MARSHALED[ref] = marshal.dumps(_compile(ref, filename))


def keep_ran(ref: str, namespace: dict) -> None:
    """Keep the namespace a code blob's module body made (the sandbox zygote of one environment, before forking):
    the first reset of each child forked after it takes it (:func:`take_ran`) instead of running the body again."""
    _RAN[ref] = namespace


def take_ran(ref: str) -> dict | None:
    """The namespace kept for ``ref``, once: a later reset in the same process runs the module body again."""
    return _RAN.pop(ref, None)


def load_parquet(path: Path) -> None:
    """Register blobs from a table with ``code_ref`` and ``code`` columns (e.g. ``tool_code.parquet``)."""
    import pyarrow.parquet as pq

    if path.exists():
        table = pq.read_table(path, columns=["code_ref", "code"])
        for ref, code in zip(table.column("code_ref").to_pylist(), table.column("code").to_pylist()):
            _BLOBS.setdefault(ref, code)


def retain_only(refs: Iterable[str]) -> None:
    """Forget every blob (and compiled code) but ``refs``: a sandbox child keeps only its own
    environment's code, so another environment's code is not reachable from it."""
    keep = set(refs)
    for table in (_BLOBS, _COMPILED, _MARSHALED, _RAN):
        kept = {ref: table[ref] for ref in keep if ref in table}
        table.clear()
        table.update(kept)
