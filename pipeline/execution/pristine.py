"""Module-level state of preloaded environment modules, restored between trajectories of a reused child.

bfcl's environment modules keep state at module level (mutable globals and default arguments, class attributes,
the ``decimal``/``mpmath`` precision). A reused child first puts it back (:func:`restore`) where it differs from
a deep copy taken before forking; the determinism check's fresh children catch a leak this misses.
"""

from __future__ import annotations

import copy
import decimal
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
