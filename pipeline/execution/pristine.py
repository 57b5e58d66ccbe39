"""Module-level state of preloaded environment modules, restored between trajectories of a reused child.

bfcl's environment modules are imported once in the sandbox worker and keep state at module level:
mutable globals (``DEFAULT_STATE`` dicts, long-context extension lists), mutable default arguments
(TwitterAPI), class attributes, and the ``decimal`` / ``mpmath`` precision MathAPI sets. A child
reused for the next trajectory first puts all of it back to what the worker imported
(:func:`restore`): compared with a pristine deep copy taken before forking and copied back only where
it differs, so an untouched module costs a comparison. The determinism check re-executes a sample in
freshly forked children, so a leak this misses still fails the run.
"""

from __future__ import annotations

import copy
import decimal
import os
import sys
import types
from typing import Any

from pipeline.envs import registry

_Kind = str  # "global" | "defaults" | "kwdefaults" | "classattr"
_SNAPSHOT: list[tuple[Any, str, _Kind, Any]] = []  # (owner, attribute, kind, pristine deep copy)
_CONTEXTS: dict[str, Any] = {}


def _is_plain_value(value: Any) -> bool:
    return not isinstance(
        value,
        (
            types.ModuleType,
            types.FunctionType,
            types.BuiltinFunctionType,
            type,
            types.MethodType,
            classmethod,
            staticmethod,
            property,
        ),
    ) and not (type(value).__module__ == "typing")


def prepare() -> None:
    """Snapshot the restorable state (in the worker, before any fork)."""
    _SNAPSHOT.clear()
    prefixes = registry.stateful_module_prefixes()  # the preloaded modules whose state is restored
    for name, module in list(sys.modules.items()):
        if module is None or not name.startswith(prefixes):
            continue
        for attr, value in list(vars(module).items()):
            if attr.startswith("__"):
                continue
            if isinstance(value, types.FunctionType):
                if value.__module__ == name:  # not what the module imported (copy.deepcopy…)
                    _snap_function(value)
            elif isinstance(value, type) and value.__module__ == name:
                for cattr, cvalue in list(vars(value).items()):
                    if cattr.startswith("__"):
                        continue
                    func = cvalue.__func__ if isinstance(cvalue, (classmethod, staticmethod)) else cvalue
                    if isinstance(func, types.FunctionType):
                        _snap_function(func)
                    elif _is_plain_value(cvalue):
                        _SNAPSHOT.append((value, cattr, "classattr", copy.deepcopy(cvalue)))
            elif _is_plain_value(value):
                _SNAPSHOT.append((module, attr, "global", copy.deepcopy(value)))
    _CONTEXTS["decimal"] = decimal.getcontext().copy()
    mp = sys.modules.get("mpmath")
    if mp is not None:
        _CONTEXTS["mpmath"] = mp.mp.prec


def _snap_function(func: types.FunctionType) -> None:
    if func.__defaults__:
        _SNAPSHOT.append((func, "__defaults__", "defaults", copy.deepcopy(func.__defaults__)))
    if func.__kwdefaults__:
        _SNAPSHOT.append((func, "__kwdefaults__", "kwdefaults", copy.deepcopy(func.__kwdefaults__)))


def _same(a: Any, b: Any) -> bool:
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:
        return False


def restore() -> int:
    """Put every snapshotted value back where it changed; returns how many were restored."""
    restored = 0
    for owner, attr, kind, pristine in _SNAPSHOT:
        current = getattr(owner, attr, None) if kind != "global" else vars(owner).get(attr)
        if not _same(current, pristine):
            setattr(owner, attr, copy.deepcopy(pristine))
            restored += 1
    if "decimal" in _CONTEXTS:
        decimal.setcontext(_CONTEXTS["decimal"].copy())
    mp = sys.modules.get("mpmath")
    if mp is not None and "mpmath" in _CONTEXTS:
        mp.mp.prec = _CONTEXTS["mpmath"]
    return restored


def prepared() -> bool:
    return bool(_SNAPSHOT) or bool(_CONTEXTS)


# -- is a reused child as clean as a fresh fork? ----------------------------------------------------

#: stdlib modules environment code commonly patches: a child whose attributes of these changed during
#: a trajectory (a rebound ``uuid.uuid4``, ``random.randint``, ``json.dumps``, a builtin…) is retired
WATCHED_MODULES: tuple[str, ...] = (
    "random",
    "uuid",
    "time",
    "datetime",
    "os",
    "posixpath",
    "json",
    "json.decoder",
    "json.encoder",
    "math",
    "secrets",
    "tempfile",
    "builtins",
    "hashlib",
    "copy",
    "re",
    "string",
    "decimal",
    "statistics",
    "collections",
    "functools",
    "itertools",
    "operator",
    "shutil",
    "io",
    "sys",
)
#: attributes whose value legitimately changes while a trajectory runs (per call; reset per trajectory)
_VOLATILE = {
    "sys": {"stdout", "stderr", "last_type", "last_value", "last_traceback", "exc_info"},
    "tempfile": {"_name_sequence", "tempdir", "tempdirb"},
}


class Fingerprint:
    """What a child's loaded modules look like when a trajectory starts: ``sys.modules`` (names and
    module objects), the attribute dicts of :data:`WATCHED_MODULES` and of the classes they define,
    and ``os.environ``. References, not copies: comparing is identity first, so it costs little."""

    def __init__(self) -> None:
        self.modules = dict(sys.modules)
        self.attrs = [(name, owner, dict(vars(owner))) for name, owner in _watched()]
        self.environ = _environ()

    def changed(self) -> str | None:
        """Why the child is no longer as it was (None: unchanged)."""
        if sys.modules != self.modules:
            added = sorted(set(sys.modules) - set(self.modules))
            removed = sorted(set(self.modules) - set(sys.modules))
            replaced = sorted(k for k in set(sys.modules) & set(self.modules) if sys.modules[k] is not self.modules[k])
            return f"sys.modules changed (added {added[:5]}, removed {removed[:5]}, replaced {replaced[:5]})"
        for name, owner, before in self.attrs:
            now = vars(owner)
            if now == before:
                continue
            volatile = _VOLATILE.get(name, ())
            for key in set(now) | set(before):
                if key in volatile:
                    continue
                if key not in now or key not in before or not _same_object(now[key], before[key]):
                    return f"{name}.{key} changed during the trajectory"
        if _environ() != self.environ:
            return "os.environ changed during the trajectory"
        return None


_WATCHED: list[tuple[tuple[tuple[str, int], ...], list[tuple[str, Any]]]] = []  # (loaded watched modules, owners)


def _watched() -> list[tuple[str, Any]]:
    """(name, module or class) whose attributes are compared: the loaded watched modules and the
    mutable classes they define (found once per set of loaded modules, not per trajectory)."""
    loaded = tuple((name, id(sys.modules[name])) for name in WATCHED_MODULES if sys.modules.get(name) is not None)
    if _WATCHED and _WATCHED[0][0] == loaded:
        return _WATCHED[0][1]
    owners: list[tuple[str, Any]] = []
    for name, _ in loaded:
        module = sys.modules[name]
        owners.append((name, module))
        for value in list(vars(module).values()):
            if isinstance(value, type) and value.__module__ == name and not _immutable(value):
                owners.append((f"{name}.{value.__qualname__}", value))
    _WATCHED[:] = [(loaded, owners)]
    return owners


def _environ() -> dict[str, str]:
    """The environment variables but those the sandbox sets per trajectory (its own directory)."""
    env = dict(os.environ)
    env.pop("TMPDIR", None)
    env.pop("HOME", None)
    return env


def _immutable(cls: type) -> bool:
    return bool(cls.__flags__ & (1 << 8))  # Py_TPFLAGS_IMMUTABLETYPE: C types, attributes read-only


def _same_object(a: Any, b: Any) -> bool:
    if a is b:
        return True
    try:
        return type(a) is type(b) and isinstance(a, (int, float, str, bytes, bool, type(None))) and a == b
    except Exception:
        return False


def thread_count() -> int:
    """Threads of the calling process (``/proc/self/task``)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 0


def reuse_verdict(fingerprint: Fingerprint | None) -> tuple[bool, str]:
    """(reusable, reason) of this child at the end of a trajectory."""
    threads = thread_count()
    if threads != 1:
        return False, f"{threads} threads at the end of the trajectory"
    if fingerprint is None:
        return False, "no fingerprint"
    why = fingerprint.changed()
    return (why is None), why or ""
