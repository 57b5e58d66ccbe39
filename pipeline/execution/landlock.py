"""Landlock: the kernel confines what a sandbox child's files may be (docs/environments.md, "Sandbox").

:func:`restrict`, in every forked child before environment code runs (under ``bwrap`` and ``trusted``):
writes only beneath the child's own directory and to ``/dev/null``, reads only beneath the top-level
directories but ``/proc``, ``/sys`` and ``/tmp``; TCP (ABI ≥ 4), signals and abstract unix sockets
(ABI ≥ 6) scoped to the child. Without Landlock :func:`restrict` returns False and the sandbox says so.
"""

from __future__ import annotations

import ctypes
import os
import sys

from pipeline.execution.freeze import HOST_FILES

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1

_READ_FILE, _READ_DIR = 1 << 2, 1 << 3
_WRITE_FILE, _REMOVE_DIR, _REMOVE_FILE = 1 << 1, 1 << 4, 1 << 5
_MAKE = sum(1 << b for b in (6, 7, 8, 9, 10, 11, 12))  # char, dir, reg, sock, fifo, block, sym
_REFER, _TRUNCATE, _IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_NET_BIND_TCP, _NET_CONNECT_TCP = 1, 2
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1, 2


class LandlockError(RuntimeError):
    """The kernel refused to confine the child (it said it could)."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


_STATE: dict[str, object] = {}


def _syscall() -> object:
    libc = ctypes.CDLL(None, use_errno=True)
    fn = libc.syscall
    fn.restype = ctypes.c_long
    return fn


def abi() -> int:
    """The Landlock ABI version this kernel offers (0: none)."""
    if "abi" not in _STATE:
        try:
            version = _syscall()(_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))  # type: ignore[operator]
        except (OSError, AttributeError):
            version = -1
        _STATE["abi"] = max(0, int(version))
    return int(_STATE["abi"])  # type: ignore[call-overload]


def prepare() -> int:
    """Probe the ABI and build the ruleset description once (in the worker, before forking)."""
    version = abi()
    if version and "attr" not in _STATE:
        fs = _READ_FILE | _READ_DIR | _WRITE_FILE | _REMOVE_DIR | _REMOVE_FILE | _MAKE
        if version >= 2:
            fs |= _REFER
        if version >= 3:
            fs |= _TRUNCATE
        if version >= 5:
            fs |= _IOCTL_DEV
        net = _NET_BIND_TCP | _NET_CONNECT_TCP if version >= 4 else 0
        scoped = _SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL if version >= 6 else 0
        _STATE["attr"] = _RulesetAttr(fs, net, scoped)
        _STATE["size"] = 8 if version < 4 else 16 if version < 6 else 24
        _STATE["dir"] = _PathBeneath(fs, -1)
        _STATE["file"] = _PathBeneath(fs & (_READ_FILE | _WRITE_FILE | _TRUNCATE | _IOCTL_DEV), -1)
        _STATE["read"] = _PathBeneath(_READ_FILE | _READ_DIR, -1)
        _STATE["read_file"] = _PathBeneath(_READ_FILE, -1)
        _STATE["readable"] = readable_tops()
        _STATE["call"] = _syscall()
    return version


#: top-level directories a child may not read: /proc (other processes, the boot line, mountinfo, its own
#: memory), /sys, and /tmp (only its own directory there)
UNREADABLE = ("proc", "sys", "tmp")


def readable_tops() -> list[str]:
    """The top-level entries of ``/`` a child may read beneath (all but :data:`UNREADABLE`), and the import
    directories on ``sys.path`` beneath an unreadable one (a plugin package under ``/tmp``)."""
    try:
        names = sorted(os.listdir("/"))
    except OSError:
        return []
    tops = ["/" + n for n in names if n not in UNREADABLE and os.path.isdir("/" + n)]
    hidden = tuple(f"/{n}/" for n in UNREADABLE)
    imports = {p for p in sys.path if p.startswith(hidden) and not p.startswith("/tmp/work") and os.path.isdir(p)}
    return tops + sorted(imports)


def restrict(writable_dir: str | int) -> bool:
    """Confine the calling process irreversibly (module docstring; also the constant ``/proc`` files readable).
    False: the kernel has no Landlock; :class:`LandlockError`: it has and refuses. Needs ``no_new_privs``."""
    if not prepare():
        return False
    call = _STATE["call"]
    ruleset = call(_CREATE_RULESET, ctypes.byref(_STATE["attr"]), ctypes.c_size_t(_STATE["size"]), ctypes.c_uint32(0))  # type: ignore[operator, arg-type]
    if ruleset < 0:
        raise LandlockError(f"landlock_create_ruleset failed: errno {ctypes.get_errno()}")
    try:
        rules: list[tuple[str | int, object]] = [(writable_dir, _STATE["dir"]), (os.devnull, _STATE["file"])]
        rules += [(top, _STATE["read"]) for top in _STATE["readable"]]  # type: ignore[attr-defined]
        rules += [(path, _STATE["read_file"]) for path in sorted(HOST_FILES)]  # constant host identity
        for path, rule in rules:
            try:
                # a descriptor: the directory however it is renamed meanwhile (a spare's)
                fd = os.dup(path) if isinstance(path, int) else os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                if path == writable_dir or path == os.devnull:
                    raise
                continue  # not on this machine
            try:
                rule.parent_fd = fd  # type: ignore[attr-defined]
                if call(_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), ctypes.c_uint32(0)) != 0:  # type: ignore[operator, arg-type]
                    raise LandlockError(f"landlock_add_rule({path}) failed: errno {ctypes.get_errno()}")
            finally:
                os.close(fd)
        if call(_RESTRICT_SELF, ruleset, ctypes.c_uint32(0)) != 0:  # type: ignore[operator]
            raise LandlockError(f"landlock_restrict_self failed: errno {ctypes.get_errno()}")
    finally:
        os.close(ruleset)
    return True
