"""Seccomp-BPF filters: the kernel refuses what environment code (and its worker) must never do.

Two filters, both refusing with ``EPERM`` (a syscall of another ABI — x32 — or architecture kills the
process):

* the **base filter** (:func:`install_base`) is installed on the sandbox worker itself, after it has
  imported the environment modules and before it serves anything. Seccomp filters are inherited by
  ``fork`` and stack, so every child runs under it whatever happens to the child filter prepared in
  the worker's memory: no ``execve``/``execveat`` (no shell, ever), no ``ptrace``/``process_vm_*``,
  no namespace or mount changes, no BPF, perf, keyrings, io_uring, userfaultfd, ``memfd_create``,
  ``pidfd_*``, special files or extended attributes; ``clone`` may not create namespaces and
  ``clone3`` answers ``ENOSYS``. The worker keeps ``fork`` and ``kill`` (it supervises children).
* the **child filter** (:func:`install`), installed in each forked child right before environment
  code runs, adds: no process creation (``fork``, ``vfork``, ``clone`` without ``CLONE_THREAD``), no
  ``kill``, ``tkill``/``tgkill`` only on the child's own thread group (``raise``/``abort`` still work),
  no ``rt_sigqueueinfo``/``rt_tgsigqueueinfo``, ``prlimit64`` only on itself (pid 0), no
  ``fcntl(F_SETOWN/F_SETOWN_EX)`` (SIGIO to another process). The program is built once in the worker;
  a child only writes its own pid into the prepared instructions before installing it.

Both need ``PR_SET_NO_NEW_PRIVS`` (set on the worker, inherited). Threads inherit the filters.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct

_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_X32_BIT = 0x40000000
_CLONE_THREAD = 0x00010000
# CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET
_CLONE_NAMESPACES = 0x7E020000
_F_SETOWN, _F_SETOWN_EX = 8, 15

# name -> syscall number per architecture (x86_64: arch/x86/entry/syscalls; aarch64: the generic table)
_SYSCALLS: dict[str, dict[str, int]] = {
    "x86_64": {
        "fork": 57, "vfork": 58, "execve": 59, "execveat": 322, "ptrace": 101, "process_vm_readv": 310,
        "process_vm_writev": 311, "kill": 62, "mount": 165, "umount2": 166, "unshare": 272, "setns": 308,
        "pivot_root": 155, "chroot": 161, "bpf": 321, "perf_event_open": 298, "keyctl": 250, "add_key": 248,
        "request_key": 249, "mknod": 133, "mknodat": 259, "setxattr": 188, "lsetxattr": 189, "fsetxattr": 190,
        "removexattr": 197, "lremovexattr": 198, "fremovexattr": 199, "io_uring_setup": 425,
        "userfaultfd": 323, "memfd_create": 319, "pidfd_open": 434, "pidfd_send_signal": 424,
        "pidfd_getfd": 438, "rt_sigqueueinfo": 129, "rt_tgsigqueueinfo": 297, "process_madvise": 440,
        "process_mrelease": 448, "kcmp": 312,
        "clone": 56, "clone3": 435, "tkill": 200, "tgkill": 234, "prlimit64": 302, "fcntl": 72,
    },
    "aarch64": {
        "execve": 221, "execveat": 281, "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271,
        "kill": 129, "mount": 40, "umount2": 39, "unshare": 97, "setns": 268, "pivot_root": 41, "chroot": 51,
        "bpf": 280, "perf_event_open": 241, "keyctl": 219, "add_key": 217, "request_key": 218, "mknodat": 33,
        "setxattr": 5, "lsetxattr": 6, "fsetxattr": 7, "removexattr": 14, "lremovexattr": 15,
        "fremovexattr": 16, "io_uring_setup": 425, "userfaultfd": 282, "memfd_create": 279,
        "pidfd_open": 434, "pidfd_send_signal": 424, "pidfd_getfd": 438, "rt_sigqueueinfo": 138,
        "rt_tgsigqueueinfo": 240, "process_madvise": 440, "process_mrelease": 448, "kcmp": 272,
        "clone": 220, "clone3": 435, "tkill": 130, "tgkill": 131, "prlimit64": 261, "fcntl": 25,
    },
}
# syscalls with an argument check (not in the plain deny lists)
_CHECKED = ("clone", "clone3", "tkill", "tgkill", "prlimit64", "fcntl")
# the worker needs these; only the child filter refuses them
_CHILD_ONLY = ("fork", "vfork", "kill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")

_LD_W_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_RET_ALLOW, _RET_KILL_PROCESS, _RET_ERRNO = 0x7FFF0000, 0x80000000, 0x00050000
_OFF_NR, _OFF_ARCH, _OFF_ARG0, _OFF_ARG1 = 0, 4, 16, 24
_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2
_PR_SET_DUMPABLE = 4
PID_PLACEHOLDER = 0x7FFFFFFF  # replaced by the child's pid in the child's copy of the program


class SeccompUnavailable(RuntimeError):
    """The kernel or architecture cannot take the filter."""


def _ins(code: int, k: int, jt: int = 0, jf: int = 0) -> tuple[int, int, int, int]:
    return code, jt, jf, k


def _head(machine: str) -> list[tuple[int, int, int, int]]:
    if machine not in _SYSCALLS:
        raise SeccompUnavailable(f"no seccomp syscall table for architecture {machine!r}")
    prog = [
        _ins(_LD_W_ABS, _OFF_ARCH),
        _ins(_JEQ, _AUDIT_ARCH[machine], jt=1),
        _ins(_RET, _RET_KILL_PROCESS),
        _ins(_LD_W_ABS, _OFF_NR),
    ]
    if machine == "x86_64":
        prog += [_ins(_JGE, _X32_BIT, jf=1), _ins(_RET, _RET_KILL_PROCESS)]
    return prog + [_ins(_JEQ, _SYSCALLS[machine]["clone3"], jf=1), _ins(_RET, _RET_ERRNO | errno.ENOSYS)]


def _deny(table: dict[str, int], names: list[str]) -> list[tuple[int, int, int, int]]:
    eperm = _RET_ERRNO | errno.EPERM
    prog = []
    for name in names:
        prog += [_ins(_JEQ, table[name], jf=1), _ins(_RET, eperm)]
    return prog


def program(machine: str | None = None) -> list[tuple[int, int, int, int]]:
    """The child filter as (code, jt, jf, k) instructions for ``machine`` (default: this one); the
    instructions comparing with the child's own pid hold :data:`PID_PLACEHOLDER`."""
    machine = machine or platform.machine()
    prog = _head(machine)
    table = _SYSCALLS[machine]
    eperm = _RET_ERRNO | errno.EPERM
    prog += _deny(table, [n for n in table if n not in _CHECKED])
    prog += [
        # tkill/tgkill: only on its own thread group (arg0: tid for tkill — the main thread's tid is
        # the pid — tgid for tgkill)
        _ins(_JEQ, table["tkill"], jt=1),
        _ins(_JEQ, table["tgkill"], jf=4),
        _ins(_LD_W_ABS, _OFF_ARG0),
        _ins(_JEQ, PID_PLACEHOLDER, jf=1),
        _ins(_RET, _RET_ALLOW),
        _ins(_RET, eperm),
        # prlimit64 only on itself (pid 0)
        _ins(_JEQ, table["prlimit64"], jf=4),
        _ins(_LD_W_ABS, _OFF_ARG0),
        _ins(_JEQ, 0, jf=1),
        _ins(_RET, _RET_ALLOW),
        _ins(_RET, eperm),
        # fcntl: no F_SETOWN / F_SETOWN_EX (SIGIO/SIGURG to another process)
        _ins(_JEQ, table["fcntl"], jf=5),
        _ins(_LD_W_ABS, _OFF_ARG1),
        _ins(_JEQ, _F_SETOWN, jt=2),
        _ins(_JEQ, _F_SETOWN_EX, jt=1),
        _ins(_RET, _RET_ALLOW),
        _ins(_RET, eperm),
        # clone: threads only
        _ins(_JEQ, table["clone"], jf=3),
        _ins(_LD_W_ABS, _OFF_ARG0),
        _ins(_JSET, _CLONE_THREAD, jt=1),
        _ins(_RET, eperm),
        _ins(_RET, _RET_ALLOW),
    ]
    return prog


def base_program(machine: str | None = None) -> list[tuple[int, int, int, int]]:
    """The worker's base filter (inherited by every child, under the child filter)."""
    machine = machine or platform.machine()
    prog = _head(machine)
    table = _SYSCALLS[machine]
    prog += _deny(table, [n for n in table if n not in _CHECKED and n not in _CHILD_ONLY])
    prog += [
        _ins(_JEQ, table["clone"], jf=3),  # clone: no new namespaces
        _ins(_LD_W_ABS, _OFF_ARG0),
        _ins(_JSET, _CLONE_NAMESPACES, jf=1),
        _ins(_RET, _RET_ERRNO | errno.EPERM),
        _ins(_RET, _RET_ALLOW),
    ]
    return prog


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


class _Prepared:
    def __init__(self, prog: list[tuple[int, int, int, int]]) -> None:
        raw = b"".join(struct.pack("HBBI", *ins) for ins in prog)
        self.buf = ctypes.create_string_buffer(raw, len(raw))
        self.fprog = _SockFprog(len(prog), ctypes.cast(self.buf, ctypes.c_void_p))
        self.pid_offsets = [i * 8 + 4 for i, ins in enumerate(prog) if ins[0] == _JEQ and ins[3] == PID_PLACEHOLDER]


_PREPARED: list[tuple[object, _Prepared]] = []  # (libc, the child filter)


def _libc() -> object:
    return _PREPARED[0][0] if _PREPARED else ctypes.CDLL(None, use_errno=True)


def prepare() -> None:
    """Build the child filter and load libc once (in the worker, before forking: a child only patches
    its pid in and calls prctl)."""
    if _PREPARED:
        return
    _PREPARED.append((ctypes.CDLL(None, use_errno=True), _Prepared(program())))


def _prctl(libc: object, *args: object) -> None:
    if libc.prctl(*args) != 0:  # type: ignore[attr-defined]
        raise SeccompUnavailable(f"prctl{args[:1]} failed: errno {ctypes.get_errno()}")


def _load(libc: object, prepared: _Prepared) -> None:
    _prctl(libc, _PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    _prctl(libc, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prepared.fprog), 0, 0)


def non_dumpable() -> None:
    """``PR_SET_DUMPABLE 0`` on the calling process (the worker): no process of the same uid — its
    children included, which inherit it across fork — may open its ``/proc/<pid>/mem``, ``fd/*``,
    ``environ``…, ptrace it or read its memory, and neither may children read each other's."""
    _prctl(_libc(), _PR_SET_DUMPABLE, 0, 0, 0, 0)


def install_base() -> None:
    """Install the base filter on the calling process (the worker; irreversible)."""
    _load(_libc(), _Prepared(base_program()))


def install() -> None:
    """Install the child filter on the calling process (irreversible), for its own pid."""
    prepare()
    libc, prepared = _PREPARED[0]
    pid = struct.pack("I", os.getpid())
    for offset in prepared.pid_offsets:
        ctypes.memmove(ctypes.addressof(prepared.buf) + offset, pid, 4)
    _load(libc, prepared)
