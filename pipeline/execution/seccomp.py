"""Seccomp filters: the kernel refuses what environment code (and its worker) must never do.

The filters are declared as rules (syscall names, actions, argument conditions) and compiled by
libseccomp (through ``pyseccomp``, a ctypes binding to the system's ``libseccomp.so.2``), which
resolves the names per architecture and generates the BPF. Both refuse with ``EPERM``; a syscall of
another architecture or ABI — x32 included — kills the process (libseccomp's bad-architecture action,
set to ``KILL_PROCESS``):

* the **base filter** (:func:`install_base`) is installed on the sandbox worker itself, after it has
  imported the environment modules and before it serves anything. Seccomp filters are inherited by
  ``fork`` and stack, so every child runs under it whatever happens to the child filter prepared in
  the worker's memory: no ``execve``/``execveat`` (no shell, ever), no ``ptrace``/``process_vm_*``,
  no namespace or mount changes, no BPF, perf, keyrings, io_uring, userfaultfd, ``memfd_create``,
  ``memfd_secret``, ``pidfd_*``, SysV IPC (shared memory, message queues, semaphores) and POSIX
  message queues (memory outside ``RLIMIT_AS`` and a channel between environments: the children of a
  worker share its IPC namespace, and cannot get their own — ``unshare``/``setns``/``clone`` with
  namespace flags are refused and bwrap dropped every capability), special files or extended attributes; ``clone`` may
  not create namespaces and ``clone3`` answers ``ENOSYS``. The worker keeps ``fork`` and ``kill`` (it supervises
  children).
* the **child filter** (:func:`install`), installed in each forked child right before environment
  code runs, adds: no process creation (``fork``, ``vfork``, ``clone`` without ``CLONE_THREAD``), no
  ``kill``, ``tkill``/``tgkill`` only on the child's own thread group (``raise``/``abort`` still work),
  no ``rt_sigqueueinfo``/``rt_tgsigqueueinfo``, ``prlimit64`` only on itself (pid 0), no
  ``fcntl(F_SETOWN/F_SETOWN_EX)`` (SIGIO to another process); no ``flock``, ``inotify``/``fanotify``, nor
  ``fcntl`` lock tests (``F_GETLK``, ``F_OFD_GETLK``), leases or ``F_NOTIFY`` (no lock or watch on a shared
  file is seen by another environment's child). Its rules are added once in the worker
  (:func:`prepare`), which also compiles its program once for a sentinel pid; a child writes its own pid
  into that program (:func:`program_for`) and loads it.

Loading sets ``PR_SET_NO_NEW_PRIVS`` (libseccomp's default; inherited) and no ``TSYNC``: the filter
applies to the calling thread (the worker and each child are single-threaded when they load it), and
threads started later inherit it. Names that do not exist on an architecture (``fork``, ``vfork`` and
``mknod`` on aarch64) are skipped by libseccomp. :func:`export_bpf` gives the compiled program of
either filter for any architecture (tests read it).

libseccomp is required wherever the sandbox runs (bwrap or trusted): without it the worker fails to
start with :class:`SeccompUnavailable`, which names the package to install.
"""

from __future__ import annotations

import ctypes
import errno
import os
import sys
import tempfile
from typing import Any

#: refused with EPERM by both filters
DENIED = (
    "execve",
    "execveat",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "mount",
    "umount2",
    "unshare",
    "setns",
    "pivot_root",
    "chroot",
    "bpf",
    "perf_event_open",
    "keyctl",
    "add_key",
    "request_key",
    "mknod",
    "mknodat",
    "setxattr",
    "lsetxattr",
    "fsetxattr",
    "removexattr",
    "lremovexattr",
    "fremovexattr",
    "io_uring_setup",
    "userfaultfd",
    "memfd_create",
    "pidfd_open",
    "pidfd_send_signal",
    "pidfd_getfd",
    "process_madvise",
    "process_mrelease",
    "kcmp",
    "memfd_secret",
    # SysV IPC and POSIX message queues (the worker's IPC namespace is shared by its children): memory
    # outside RLIMIT_AS and a channel between environments; nothing we run, and no corpus code, uses them
    "shmget",
    "shmat",
    "shmdt",
    "shmctl",
    "msgget",
    "msgsnd",
    "msgrcv",
    "msgctl",
    "semget",
    "semop",
    "semtimedop",
    "semctl",
    "mq_open",
    "mq_unlink",
    "mq_timedsend",
    "mq_timedreceive",
    "mq_notify",
    "mq_getsetattr",
)
#: refused with EPERM by the child filter only (the worker supervises its children with them); ``flock``
#: and file notifications: a lock or a watch on a file every child can open (the installed sources, /usr)
#: would be a channel between environments
CHILD_DENIED = (
    "fork",
    "vfork",
    "kill",
    "rt_sigqueueinfo",
    "rt_tgsigqueueinfo",
    "flock",
    "inotify_init",
    "inotify_init1",
    "fanotify_init",
)
#: architectures the filters are built for (``os.uname().machine`` -> libseccomp's name)
ARCHITECTURES = {"x86_64": "X86_64", "aarch64": "AARCH64"}

_CLONE_THREAD = 0x00010000
# CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET
_CLONE_NAMESPACES = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000)
_F_SETOWN, _F_SETOWN_EX = 8, 15
#: fcntl commands the child filter refuses besides F_SETOWN(_EX): testing for another process's lock
#: (F_GETLK, F_OFD_GETLK), leases and directory notifications. Taking a POSIX or OFD lock stays allowed (sqlite
#: in the child's own directory): on a file a child can only read, only a read lock can be taken, and read locks
#: never conflict, so without the test no child can see another's lock
_F_GETLK, _F_OFD_GETLK, _F_SETLEASE, _F_NOTIFY = 5, 36, 1024, 1026
_INT = 0xFFFFFFFF  # a 32-bit argument (fcntl's cmd): the kernel ignores the register's upper half
_PR_SET_DUMPABLE = 4
_PRIO_PROCESS, _IOPRIO_WHO_PROCESS = 0, 1
#: child filter: refused unless their first argument (a pid) is 0, the caller
SELF_ONLY = (
    "prlimit64",
    "sched_setaffinity",
    "sched_setscheduler",
    "sched_setparam",
    "sched_setattr",
    "migrate_pages",
    "move_pages",
)


class SeccompUnavailable(RuntimeError):
    """libseccomp, the kernel or the architecture cannot take the filter."""


def _lib() -> Any:
    """The ``pyseccomp`` module (libseccomp's Python API), or a :class:`SeccompUnavailable` naming the fix."""
    try:
        import pyseccomp
    except ImportError as exc:
        raise SeccompUnavailable(
            f"the sandbox's seccomp filter needs the Python package 'pyseccomp' ({exc}): "
            "run 'pip install -e .' (it is a declared dependency)"
        ) from exc
    except RuntimeError as exc:  # pyseccomp raises RuntimeError when libseccomp.so is not found
        raise SeccompUnavailable(
            f"the sandbox's seccomp filter needs libseccomp ({exc}): install it with "
            "'sudo apt-get install libseccomp2' (Debian/Ubuntu) or 'dnf install libseccomp' (Fedora)"
        ) from exc
    return pyseccomp


def _new(machine: str | None) -> Any:
    """An allow-by-default filter for ``machine`` (default: this one), killing the process on any other
    architecture (and, on x86_64, on x32 syscalls), refusing ``clone3`` with ``ENOSYS`` (its flags live
    in memory a filter cannot read; libc falls back to ``clone``) and every name in :data:`DENIED`."""
    lib = _lib()
    machine = machine or os.uname().machine
    if machine not in ARCHITECTURES:
        raise SeccompUnavailable(
            f"no seccomp filter for architecture {machine!r} (built for {', '.join(ARCHITECTURES)})"
        )
    f = lib.SyscallFilter(lib.ALLOW)
    arch = getattr(lib.Arch, ARCHITECTURES[machine])
    if arch != lib.system_arch():
        f.add_arch(arch)
        f.remove_arch(lib.Arch.NATIVE)
    f.set_attr(lib.Attr.ACT_BADARCH, lib.KILL_PROCESS)
    f.add_rule(lib.ERRNO(errno.ENOSYS), "clone3")
    for name in DENIED:
        f.add_rule(lib.ERRNO(errno.EPERM), name)
    return f


def base_filter(machine: str | None = None) -> Any:
    """The worker's base filter (inherited by every child, under the child filter)."""
    lib = _lib()
    f = _new(machine)
    for bit in _CLONE_NAMESPACES:  # clone: no new namespaces
        f.add_rule(lib.ERRNO(errno.EPERM), "clone", lib.Arg(0, lib.MASKED_EQ, bit, bit))
    return f


def child_filter(machine: str | None = None, pid: int | None = None) -> Any:
    """The child filter; with ``pid``, complete (``tkill``/``tgkill`` only on that thread group), without
    it, the part the worker prepares before forking (:func:`with_pid` completes it)."""
    lib = _lib()
    f = _new(machine)
    eperm = lib.ERRNO(errno.EPERM)
    for name in CHILD_DENIED:
        f.add_rule(eperm, name)
    f.add_rule(eperm, "clone", lib.Arg(0, lib.MASKED_EQ, _CLONE_THREAD, 0))  # threads only
    for name in SELF_ONLY:  # only on itself
        f.add_rule(eperm, name, lib.Arg(0, lib.NE, 0))
    # setpriority/ioprio_set: only (PRIO_PROCESS / IOPRIO_WHO_PROCESS, 0) — no group, user or other pid
    for name, which in (("setpriority", _PRIO_PROCESS), ("ioprio_set", _IOPRIO_WHO_PROCESS)):
        f.add_rule(eperm, name, lib.Arg(0, lib.NE, which))
        f.add_rule(eperm, name, lib.Arg(1, lib.NE, 0))
    for cmd in (_F_SETOWN, _F_SETOWN_EX, _F_GETLK, _F_OFD_GETLK, _F_SETLEASE, _F_NOTIFY):  # no SIGIO/SIGURG to
        # another process, no lock test, lease or notification
        f.add_rule(eperm, "fcntl", lib.Arg(1, lib.MASKED_EQ, _INT, cmd))
    return f if pid is None else with_pid(f, pid)


def with_pid(f: Any, pid: int) -> Any:
    """Add to a prepared child filter: ``tkill``/``tgkill`` only on ``pid``'s thread group (arg0: the tid
    for ``tkill`` — the main thread's tid is the pid — the tgid for ``tgkill``)."""
    lib = _lib()
    for name in ("tkill", "tgkill"):
        f.add_rule(lib.ERRNO(errno.EPERM), name, lib.Arg(0, lib.NE, pid))
    return f


def export_bpf(f: Any) -> bytes:
    """The compiled BPF program of filter ``f`` (8-byte ``sock_filter`` instructions, native byte order)."""
    with tempfile.TemporaryFile() as out:
        f.export_bpf(out)
        out.seek(0)
        return out.read()


_PREPARED: list[Any] = []  # the child filter, without its pid rules (built in the worker)
_PROGRAM: list[tuple[bytes, tuple[int, ...]]] = []  # its BPF for PID_SENTINEL, where the sentinel is
_LIBC: list[Any] = []
PID_SENTINEL = 0x3FFFFFF1  # a pid no process has (pid_max is at most 2**22): replaced by the child's own
_JMP_K = 0x05  # BPF_JMP class (0x05) with a constant operand (BPF_K = 0)
_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2


def program_for(pid: int) -> bytes | None:
    """The child filter's BPF for ``pid``: the program compiled once for :data:`PID_SENTINEL` with the pid
    written where the sentinel was — byte for byte what libseccomp compiles for ``pid`` (a test holds
    it for pids from 2 on; 0 and 1, which libseccomp folds into other comparisons, are never a child's) —
    without compiling it again in every child. None before :func:`prepare`, or for pid 0 or 1."""
    if not _PROGRAM or pid < 2:
        return None
    program, where = _PROGRAM[0]
    out = bytearray(program)
    for offset in where:
        out[offset + 4 : offset + 8] = pid.to_bytes(4, sys.byteorder)
    return bytes(out)


def prepare() -> None:
    """Add the child filter's rules once and compile its program (in the worker, before forking: a child
    only writes its pid into the program and loads it)."""
    if not _PREPARED:
        _PREPARED.append(child_filter())
        program = export_bpf(child_filter(pid=PID_SENTINEL))
        where = tuple(
            i
            for i in range(0, len(program), 8)
            if program[i] & 0x07 == _JMP_K
            and program[i + 1] & 0x08 == 0
            and int.from_bytes(program[i + 4 : i + 8], sys.byteorder) == PID_SENTINEL
        )
        if where:
            _PROGRAM.append((program, where))
    if not _LIBC:
        _LIBC.append(ctypes.CDLL(None, use_errno=True))


def _load(f: Any) -> None:
    try:
        f.load()
    except OSError as exc:
        raise SeccompUnavailable(f"the kernel refused the seccomp filter: {exc}") from exc


def non_dumpable() -> None:
    """``PR_SET_DUMPABLE 0`` on the calling process (the worker): no process of the same uid — its
    children included, which inherit it across fork — may open its ``/proc/<pid>/mem``, ``fd/*``,
    ``environ``…, ptrace it or read its memory, and neither may children read each other's."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise SeccompUnavailable(f"prctl(PR_SET_DUMPABLE) failed: errno {ctypes.get_errno()}")


def install_base() -> None:
    """Install the base filter on the calling process (the worker; irreversible)."""
    _load(base_filter())


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _load_program(program: bytes) -> None:
    """Load a compiled BPF program on the calling thread (``no_new_privs`` is set: the base filter)."""
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    if not _LIBC:
        _LIBC.append(ctypes.CDLL(None, use_errno=True))
    libc = _LIBC[0]
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        raise SeccompUnavailable(f"the kernel refused the seccomp filter: errno {ctypes.get_errno()}")


def install() -> None:
    """Install the child filter on the calling process (irreversible), for its own pid: the program the
    worker compiled (:func:`program_for`), or compiled here."""
    prepare()
    program = program_for(os.getpid())
    if program is not None:
        _load_program(program)
    else:
        _load(with_pid(_PREPARED[0], os.getpid()))
