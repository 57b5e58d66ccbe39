"""A seccomp-BPF filter for sandbox children: the kernel refuses what environment code must never do.

Installed in each forked child right before environment code runs (after ``PR_SET_NO_NEW_PRIVS``;
irreversible, inherited by every thread). Refused with ``EPERM``: creating processes (``fork``,
``vfork``, ``clone`` without ``CLONE_THREAD``, ``execve``/``execveat`` — so no shell, whether through
``subprocess``, ``os.system`` or ``_posixsubprocess.fork_exec`` called directly), tracing or writing
other processes (``ptrace``, ``process_vm_*``), signalling them (``kill``), namespace and mount
changes, special files (``mknod``/``mknodat``: FIFOs, device nodes), extended attributes, kernel
keyrings, BPF, perf, io_uring and userfaultfd. ``clone3`` answers ``ENOSYS`` so threads fall back to
``clone`` (with ``CLONE_THREAD``, allowed). A syscall of another ABI (x32) or architecture kills
the process.
"""

from __future__ import annotations

import ctypes
import errno
import platform
import struct

_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_X32_BIT = 0x40000000
_CLONE_THREAD = 0x00010000

# name -> syscall number per architecture (x86_64: arch/x86/entry/syscalls; aarch64: the generic table)
_SYSCALLS: dict[str, dict[str, int]] = {
    "x86_64": {
        "fork": 57, "vfork": 58, "execve": 59, "execveat": 322, "ptrace": 101, "process_vm_readv": 310,
        "process_vm_writev": 311, "kill": 62, "mount": 165, "umount2": 166, "unshare": 272, "setns": 308,
        "pivot_root": 155, "chroot": 161, "bpf": 321, "perf_event_open": 298, "keyctl": 250, "add_key": 248,
        "request_key": 249, "mknod": 133, "mknodat": 259, "setxattr": 188, "lsetxattr": 189, "fsetxattr": 190,
        "removexattr": 197, "lremovexattr": 198, "fremovexattr": 199, "io_uring_setup": 425,
        "userfaultfd": 323, "clone": 56, "clone3": 435,
    },
    "aarch64": {
        "execve": 221, "execveat": 281, "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271,
        "kill": 129, "mount": 40, "umount2": 39, "unshare": 97, "setns": 268, "pivot_root": 41, "chroot": 51,
        "bpf": 280, "perf_event_open": 241, "keyctl": 219, "add_key": 217, "request_key": 218, "mknodat": 33,
        "setxattr": 5, "lsetxattr": 6, "fsetxattr": 7, "removexattr": 14, "lremovexattr": 15,
        "fremovexattr": 16, "io_uring_setup": 425, "userfaultfd": 282, "clone": 220, "clone3": 435,
    },
}

_LD_W_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_RET_ALLOW, _RET_KILL_PROCESS, _RET_ERRNO = 0x7FFF0000, 0x80000000, 0x00050000
_OFF_NR, _OFF_ARCH, _OFF_ARG0 = 0, 4, 16
_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2


class SeccompUnavailable(RuntimeError):
    """The kernel or architecture cannot take the filter."""


def _ins(code: int, k: int, jt: int = 0, jf: int = 0) -> tuple[int, int, int, int]:
    return code, jt, jf, k


def program(machine: str | None = None) -> list[tuple[int, int, int, int]]:
    """The filter as (code, jt, jf, k) instructions for ``machine`` (default: this one)."""
    machine = machine or platform.machine()
    if machine not in _SYSCALLS:
        raise SeccompUnavailable(f"no seccomp syscall table for architecture {machine!r}")
    table = _SYSCALLS[machine]
    eperm = _RET_ERRNO | errno.EPERM
    prog = [
        _ins(_LD_W_ABS, _OFF_ARCH),
        _ins(_JEQ, _AUDIT_ARCH[machine], jt=1),
        _ins(_RET, _RET_KILL_PROCESS),
        _ins(_LD_W_ABS, _OFF_NR),
    ]
    if machine == "x86_64":
        prog += [_ins(_JGE, _X32_BIT, jf=1), _ins(_RET, _RET_KILL_PROCESS)]
    prog += [_ins(_JEQ, table["clone3"], jf=1), _ins(_RET, _RET_ERRNO | errno.ENOSYS)]
    for name, nr in table.items():
        if name not in ("clone", "clone3"):
            prog += [_ins(_JEQ, nr, jf=1), _ins(_RET, eperm)]
    prog += [
        _ins(_JEQ, table["clone"], jf=3),
        _ins(_LD_W_ABS, _OFF_ARG0),
        _ins(_JSET, _CLONE_THREAD, jt=1),
        _ins(_RET, eperm),
        _ins(_RET, _RET_ALLOW),
    ]
    return prog


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


_PREPARED: list[tuple[object, object, object]] = []  # (libc, fprog, buffer kept alive)


def prepare() -> None:
    """Build the filter and load libc once (in the zygote, before forking: a child only calls prctl)."""
    if _PREPARED:
        return
    prog = program()
    raw = b"".join(struct.pack("HBBI", *ins) for ins in prog)
    buf = ctypes.create_string_buffer(raw, len(raw))
    fprog = _SockFprog(len(prog), ctypes.cast(buf, ctypes.c_void_p))
    _PREPARED.append((ctypes.CDLL(None, use_errno=True), fprog, buf))


def install() -> None:
    """Install the filter on the calling process (irreversible)."""
    prepare()
    libc, fprog, _buf = _PREPARED[0]
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:  # type: ignore[attr-defined]
        raise SeccompUnavailable(f"prctl(PR_SET_NO_NEW_PRIVS) failed: errno {ctypes.get_errno()}")
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:  # type: ignore[attr-defined]
        raise SeccompUnavailable(f"prctl(PR_SET_SECCOMP) failed: errno {ctypes.get_errno()}")
