"""Seccomp filters, **default deny**: the kernel allows only the syscalls in :data:`SYSCALLS` (docs/environments.md
"The syscall allowlist" holds :func:`table_markdown`); every other one is refused with :data:`REFUSED_ERRNO` + its
number (labeled ``sandbox_refused``, :func:`refused_syscall`); ``clone3`` answers ``ENOSYS`` (libc falls back to
``clone``, whose flags a filter can read); :data:`ANSWERED` get a fixed errno; arguments outside an entry's
conditions get ``EPERM`` (or a named refusal, :data:`NAMED_REFUSALS`); another architecture's or x32 syscall kills
the process. libseccomp (``pyseccomp``) compiles them.

Each entry is ``(name, scope, reason, when)``: ``scope`` ``"child"`` (environment code, and so the worker) or
``"worker"`` (the sandbox worker and its zygote only); ``when`` ``None`` (any arguments), ``()`` (the child's
own pid, added in the child), or alternatives of argument conditions ``(index, op, value)`` that must all hold
(``"eq"``/``"ne"`` on the 64-bit register, ``"eq32"`` on its lower half, ``"masked0"``: no bit of ``value``,
``"masked"``: ``value`` is ``(mask, bits)``, the argument's bits under ``mask`` are ``bits``).
The **base filter** (:func:`install_base`, the whole table) is loaded on the worker before it serves anything
and is inherited by every child; the **child filter** (:func:`install`, the ``"child"`` entries) stacks on it
before environment code runs, from a program compiled once in the worker (:func:`prepare`).
"""

from __future__ import annotations

import ctypes
import errno
import os
import re
import sys
import tempfile
from typing import Any

# CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET
_CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
_CLONE_THREAD_FLAGS = 0x00010000 | 0x00000100 | 0x00000800  # CLONE_THREAD, CLONE_VM, CLONE_SIGHAND
_CLONE_VFORK, _CLONE_PARENT = 0x00004000, 0x00008000
_PRIO_PROCESS, _IOPRIO_WHO_PROCESS, _AF_UNIX = 0, 1, 1
_MAP_SHARED, _PROT_WRITE, _FUTEX_PRIVATE, _FUTEX_WAIT, _FUTEX_WAIT_BITSET = 0x01, 0x02, 0x80, 0, 9
# fcntl: dup, get/set descriptor and status flags, take a POSIX or OFD lock, test a POSIX lock (sqlite in the
# child's own directory; on a file a child can only read only a read lock can be taken, and read locks never
# conflict; the lock test on a shared read-only file is the channel docs/environments.md names)
_F_DUPFD, _F_GETFD, _F_SETFD, _F_GETFL, _F_SETFL, _F_GETLK, _F_SETLK, _F_SETLKW = 0, 1, 2, 3, 4, 5, 6, 7
_F_OFD_SETLK, _F_OFD_SETLKW, _F_DUPFD_CLOEXEC = 37, 38, 1030
# ioctl: isatty (TCGETS), the terminal size (TIOCGWINSZ), FIONREAD, FIONBIO, FIOCLEX/FIONCLEX
_IOCTLS = (0x5401, 0x5413, 0x541B, 0x5421, 0x5450, 0x5451)
# prctl: thread names, the dumpable flag read, PR_SET_VMA (glibc names its mappings)
_PR_GET_DUMPABLE, _PR_SET_DUMPABLE, _PR_SET_NAME, _PR_GET_NAME = 3, 4, 15, 16
_PR_SET_SECCOMP, _PR_SET_NO_NEW_PRIVS, _PR_GET_NO_NEW_PRIVS, _PR_SET_VMA = 22, 38, 39, 0x53564D41
_SECCOMP_MODE_FILTER = 2

Cond = tuple[int, str, Any]
When = tuple[tuple[Cond, ...], ...] | None


def _any(index: int, values: tuple[int, ...], op: str = "eq32") -> When:
    return tuple(((index, op, v),) for v in values)


_SELF: When = (((0, "eq", 0),),)  # first argument (a pid) 0: the caller itself

#: THE allowlist: ``(name, scope, reason, when)`` — see the module docstring
SYSCALLS: tuple[tuple[str, str, str, When], ...] = (
    # -- files (Landlock confines writes to the child's own directory; reads see only what bwrap shows)
    ("read", "child", "read a file or the request pipe", None),
    ("write", "child", "write a file or the frame pipe", None),
    ("readv", "child", "vectored read (buffered I/O)", None),
    ("writev", "child", "vectored write (buffered I/O)", None),
    ("pread64", "child", "positioned read (sqlite, zipimport)", None),
    ("pwrite64", "child", "positioned write (sqlite)", None),
    ("lseek", "child", "file position", None),
    ("open", "child", "open a file (x86_64's old call)", None),
    ("openat", "child", "open a file", None),
    ("creat", "child", "create a file (x86_64's old call)", None),
    ("close", "child", "close a descriptor", None),
    ("close_range", "child", "os.closerange", None),
    ("fstat", "child", "stat an open file", None),
    ("stat", "child", "stat a path (x86_64)", None),
    ("lstat", "child", "stat a link (x86_64)", None),
    ("newfstatat", "child", "stat a path", None),
    ("statx", "child", "stat a path (glibc's first choice)", None),
    ("access", "child", "os.access (x86_64)", None),
    ("faccessat", "child", "os.access", None),
    ("faccessat2", "child", "os.access (glibc's first choice)", None),
    ("readlink", "child", "resolve a link (x86_64)", None),
    ("readlinkat", "child", "resolve a link", None),
    ("getdents64", "child", "list a directory", None),
    ("getcwd", "child", "os.getcwd", None),
    ("chdir", "child", "os.chdir", None),
    ("fchdir", "child", "os.chdir on a descriptor", None),
    ("mkdir", "child", "make a directory (x86_64)", None),
    ("mkdirat", "child", "make a directory", None),
    ("rmdir", "child", "remove a directory (x86_64)", None),
    ("unlink", "child", "remove a file (x86_64)", None),
    ("unlinkat", "child", "remove a file or directory", None),
    ("rename", "child", "rename (x86_64)", None),
    ("renameat", "child", "rename", None),
    ("renameat2", "child", "rename (glibc's first choice)", None),
    ("link", "child", "hard link (x86_64; Landlock REFER keeps both ends in its directory)", None),
    ("linkat", "child", "hard link", None),
    ("symlink", "child", "symbolic link (x86_64)", None),
    ("symlinkat", "child", "symbolic link", None),
    ("truncate", "child", "truncate a path (within RLIMIT_FSIZE and the tmpfs size)", None),
    ("ftruncate", "child", "truncate an open file", None),
    ("fallocate", "child", "reserve file space (sqlite; within RLIMIT_FSIZE and the tmpfs size)", None),
    ("fsync", "child", "flush a file (sqlite)", None),
    ("fdatasync", "child", "flush a file's data (sqlite)", None),
    ("sendfile", "child", "shutil.copyfile's file-to-file copy", None),
    ("copy_file_range", "child", "os.copy_file_range", None),
    ("umask", "child", "the process's own creation mask", None),
    ("chmod", "child", "os.chmod, shutil.copymode (only files of the sandbox's own uid: its instance's tmpfs)", None),
    ("fchmod", "child", "os.chmod on a descriptor (files of its own uid only)", None),
    ("fchmodat", "child", "os.chmod (files of its own uid only)", None),
    ("fchmodat2", "child", "os.chmod with flags (files of its own uid only)", None),
    ("utime", "child", "os.utime (x86_64; files of its own uid only)", None),
    ("utimes", "child", "os.utime (x86_64; files of its own uid only)", None),
    ("utimensat", "child", "os.utime, shutil.copystat (files of its own uid only)", None),
    ("statfs", "child", "shutil.disk_usage, os.statvfs", None),
    ("fstatfs", "child", "os.fstatvfs", None),
    ("dup", "child", "duplicate a descriptor", None),
    ("dup2", "child", "duplicate a descriptor (x86_64)", None),
    ("dup3", "child", "duplicate a descriptor", None),
    (
        "fcntl",
        "child",
        "dup, descriptor/status flags, taking and testing locks only (no F_SETOWN, lease, notify, pipe size)",
        _any(
            1,
            (_F_DUPFD, _F_GETFD, _F_SETFD, _F_GETFL, _F_SETFL, _F_GETLK, _F_SETLK, _F_SETLKW, _F_OFD_SETLK)
            + (_F_OFD_SETLKW, _F_DUPFD_CLOEXEC),
        ),
    ),
    ("ioctl", "child", "isatty, terminal size, FIONREAD/FIONBIO/FIOCLEX only", _any(1, _IOCTLS)),
    ("select", "child", "select.select, a sleep idiom (x86_64)", None),
    ("epoll_create", "child", "an asyncio event loop's selector (x86_64)", None),
    ("epoll_create1", "child", "an asyncio event loop's selector", None),
    ("epoll_ctl", "child", "an asyncio event loop's selector", None),
    ("epoll_wait", "child", "an asyncio event loop's selector (x86_64)", None),
    ("epoll_pwait", "child", "an asyncio event loop's selector", None),
    ("epoll_pwait2", "child", "an asyncio event loop's selector", None),
    ("pipe", "child", "a pipe inside the process (x86_64; the worker: a child's frame and request pipes)", None),
    ("pipe2", "child", "a pipe inside the process (the worker: a child's frame and request pipes)", None),
    ("eventfd", "child", "an event counter of its own (x86_64)", None),
    ("eventfd2", "child", "an event counter of its own", None),
    ("socketpair", "child", "asyncio's self-pipe: an AF_UNIX pair inside the process only", _any(0, (_AF_UNIX,))),
    ("sendto", "child", "send on its own socket pair (no socket reaches outside)", None),
    ("recvfrom", "child", "receive on its own socket pair", None),
    ("sendmsg", "child", "send on its own socket pair", None),
    ("recvmsg", "child", "receive on its own socket pair", None),
    ("shutdown", "child", "close one direction of its own socket pair", None),
    ("getsockopt", "child", "options of its own socket pair", None),
    ("setsockopt", "child", "options of its own socket pair", None),
    ("getsockname", "child", "its own socket pair's name", None),
    ("getpeername", "child", "its own socket pair's peer", None),
    ("pselect6", "child", "select.select", None),
    ("poll", "child", "select.poll (x86_64)", None),
    ("ppoll", "child", "select.poll", None),
    # -- memory (everything a child maps counts against RLIMIT_AS)
    ("brk", "child", "heap", None),
    (
        "mmap",
        "child",
        "anonymous and private file mappings; a shared file mapping only writable (a file opened for writing: "
        "its own directory), never a read-only one of a file others map",
        (((3, "masked0", _MAP_SHARED),), ((4, "eq32", 0xFFFFFFFF),), ((2, "masked", (_PROT_WRITE, _PROT_WRITE)),)),
    ),
    ("munmap", "child", "unmap", None),
    ("mremap", "child", "grow a mapping (realloc)", None),
    ("mprotect", "child", "page protection (loading extension modules)", None),
    ("madvise", "child", "free pages (malloc)", None),
    ("msync", "child", "flush an mmap'ed file (mmap.flush)", None),
    # -- signals and time (its own process only)
    ("rt_sigaction", "child", "signal handlers", None),
    ("rt_sigprocmask", "child", "signal mask", None),
    ("rt_sigreturn", "child", "return from a handler", None),
    ("rt_sigpending", "child", "signal.sigpending", None),
    ("rt_sigsuspend", "child", "signal.pause", None),
    ("rt_sigtimedwait", "child", "signal.sigtimedwait", None),
    ("sigaltstack", "child", "faulthandler's signal stack", None),
    ("pause", "child", "signal.pause (x86_64)", None),
    ("restart_syscall", "child", "a syscall interrupted by a signal resumes", None),
    ("tkill", "child", "raise()/abort() on itself only (the pid is added in the child)", ()),
    ("tgkill", "child", "raise()/abort() on itself only (the pid is added in the child)", ()),
    ("alarm", "child", "signal.alarm on itself (x86_64)", None),
    ("setitimer", "child", "signal.setitimer on itself", None),
    ("getitimer", "child", "signal.getitimer", None),
    ("nanosleep", "child", "time.sleep", None),
    ("clock_nanosleep", "child", "time.sleep", None),
    ("clock_gettime", "child", "clocks (Python's are frozen; libc's fallback from the vDSO)", None),
    ("clock_getres", "child", "time.get_clock_info", None),
    ("gettimeofday", "child", "libc's fallback from the vDSO", None),
    ("time", "child", "libc's fallback from the vDSO (x86_64)", None),
    (
        "futex",
        "child",
        "locks and condition variables: private operations, and a shared wait (pthread_join); no shared wake, "
        "requeue or PI operation (a futex keyed by a file's page)",
        (
            ((1, "masked", (_FUTEX_PRIVATE, _FUTEX_PRIVATE)),),
            ((1, "masked", (0xFF, _FUTEX_WAIT)),),
            ((1, "masked", (0xFF, _FUTEX_WAIT_BITSET)),),
        ),
    ),
    (
        "clone",
        "child",
        "a thread: CLONE_THREAD|CLONE_VM|CLONE_SIGHAND, no namespace, no vfork (never a new process)",
        (((0, "masked", (_CLONE_THREAD_FLAGS | _CLONE_NAMESPACES | _CLONE_VFORK, _CLONE_THREAD_FLAGS)),),),
    ),
    ("set_robust_list", "child", "a new thread's robust futex list (libc)", None),
    ("rseq", "child", "a new thread's restartable sequences (libc)", None),
    ("membarrier", "child", "a memory barrier across its own threads", None),
    ("sched_yield", "child", "yield the CPU", None),
    ("getrandom", "child", "randomness (Python's is seeded per trajectory)", None),
    ("exit", "child", "end a thread", None),
    ("exit_group", "child", "end the process", None),
    # -- its own identity and limits
    ("getpid", "child", "os.getpid", None),
    ("gettid", "child", "threading.get_native_id", None),
    ("getppid", "child", "os.getppid (a pid inside the instance's PID namespace)", None),
    ("getuid", "child", "os.getuid", None),
    ("geteuid", "child", "os.geteuid", None),
    ("getgid", "child", "os.getgid", None),
    ("getegid", "child", "os.getegid", None),
    ("getresuid", "child", "os.getresuid", None),
    ("getresgid", "child", "os.getresgid", None),
    ("getgroups", "child", "os.getgroups", None),
    ("getpgrp", "child", "os.getpgrp", None),
    ("getpgid", "child", "os.getpgid(0) only", _SELF),
    ("getsid", "child", "os.getsid(0) only", _SELF),
    ("uname", "child", "platform, os.uname (the hostname is the sandbox's)", None),
    ("getrusage", "child", "resource.getrusage (its own)", None),
    ("getrlimit", "child", "resource.getrlimit (x86_64)", None),
    ("prlimit64", "child", "resource.get/setrlimit on itself only (limits only go down)", _SELF),
    ("getpriority", "child", "os.getpriority on itself only", (((0, "eq", _PRIO_PROCESS), (1, "eq", 0)),)),
    (
        "setpriority",
        "child",
        "lower its own priority only (PRIO_PROCESS, 0)",
        (((0, "eq", _PRIO_PROCESS), (1, "eq", 0)),),
    ),
    ("ioprio_get", "child", "its own I/O priority", (((0, "eq", _IOPRIO_WHO_PROCESS), (1, "eq", 0)),)),
    ("ioprio_set", "child", "its own I/O priority only", (((0, "eq", _IOPRIO_WHO_PROCESS), (1, "eq", 0)),)),
    ("sched_getaffinity", "child", "os.sched_getaffinity(0), os.cpu_count", _SELF),
    ("sched_setaffinity", "child", "pin itself only", _SELF),
    ("sched_getparam", "child", "its own scheduling", _SELF),
    ("sched_setparam", "child", "its own scheduling only", _SELF),
    ("sched_getscheduler", "child", "its own scheduling", _SELF),
    ("sched_setscheduler", "child", "its own scheduling only", _SELF),
    ("sched_setattr", "child", "its own scheduling only", _SELF),
    ("sched_get_priority_max", "child", "os.sched_get_priority_max", None),
    ("sched_get_priority_min", "child", "os.sched_get_priority_min", None),
    ("migrate_pages", "child", "its own pages only", _SELF),
    ("move_pages", "child", "its own pages only", _SELF),
    (
        "prctl",
        "child",
        "thread names, mapping names, reading its flags (never PR_SET_DUMPABLE)",
        _any(0, (_PR_GET_DUMPABLE, _PR_SET_NAME, _PR_GET_NAME, _PR_GET_NO_NEW_PRIVS, _PR_SET_VMA)),
    ),
    # -- the worker and its zygote only (its children never get these)
    (
        "clone",
        "worker",
        "fork a child or a spare (CLONE_PARENT); never a namespace",
        (((0, "masked0", _CLONE_NAMESPACES),),),
    ),
    ("wait4", "worker", "reap its children", None),
    ("waitid", "worker", "reap its children", None),
    ("kill", "worker", "kill its children", None),
    (
        "prctl",
        "worker",
        "a child sets no_new_privs and loads its filter (PR_SET_SECCOMP)",
        _any(0, (_PR_SET_SECCOMP, _PR_SET_NO_NEW_PRIVS)),
    ),
    ("seccomp", "worker", "a child loads its filter (stacks: only more restrictive)", _any(0, (1,))),
    ("landlock_create_ruleset", "worker", "a child's Landlock ruleset (applied before its filter)", None),
    ("landlock_add_rule", "worker", "a child's Landlock ruleset", None),
    ("landlock_restrict_self", "worker", "a child's Landlock ruleset", None),
)

#: calls answered with a fixed errno that ordinary code handles as "not supported here": ``(name, errno, why)``
ANSWERED: tuple[tuple[str, int, str], ...] = (
    *(
        (name, errno.EOPNOTSUPP, "no extended attributes (shutil.copy2 skips them, as on a filesystem without)")
        for name in ("getxattr", "lgetxattr", "fgetxattr", "listxattr", "llistxattr", "flistxattr")
        + ("setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr", "fremovexattr")
    ),
    ("sysinfo", errno.ENOSYS, "the host's memory, load and uptime: the preloaded library below Python answers libc"),
)

#: argument combinations outside an entry's conditions refused with their syscall named (not ``EPERM``):
#: ``(name, when)``; an allowing condition that also holds wins
NAMED_REFUSALS: tuple[tuple[str, When], ...] = (
    ("clone", (((0, "masked", (0x00010000, 0)),), ((0, "masked", (_CLONE_VFORK, _CLONE_VFORK)),))),
    *(("clone", (((0, "masked", (bit, bit)),),)) for bit in (0x00020000, 0x02000000, 0x04000000, 0x08000000)),
    *(("clone", (((0, "masked", (bit, bit)),),)) for bit in (0x10000000, 0x20000000, 0x40000000)),
    ("mmap", (((3, "masked", (_MAP_SHARED, _MAP_SHARED)), (2, "masked", (_PROT_WRITE, 0))),)),
    ("futex", (((1, "masked", (_FUTEX_PRIVATE, 0)),),)),
)

#: a refused syscall's errno: this plus its number (below the kernel's MAX_ERRNO 4095 for every number)
REFUSED_ERRNO = 3072
_MAX_NR = 1023

#: architectures the filters are built for (``os.uname().machine`` -> libseccomp's name)
ARCHITECTURES = {"x86_64": "X86_64", "aarch64": "AARCH64"}


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


def _resolvable(lib: Any, name: str, arch: Any) -> bool:
    try:
        return lib.resolve_syscall(arch, name) >= 0
    except Exception:
        return False


def _args(lib: Any, alternative: tuple[Cond, ...]) -> list[Any]:
    """libseccomp's argument comparisons for one alternative of conditions."""
    args = []
    for index, op, value in alternative:
        if op == "eq32":
            args.append(lib.Arg(index, lib.MASKED_EQ, 0xFFFFFFFF, value))
        elif op == "masked0":
            args.append(lib.Arg(index, lib.MASKED_EQ, value, 0))
        elif op == "masked":
            args.append(lib.Arg(index, lib.MASKED_EQ, *value))
        else:
            args.append(lib.Arg(index, {"eq": lib.EQ, "ne": lib.NE}[op], value))
    return args


def _new(machine: str | None, scopes: tuple[str, ...]) -> Any:
    """The default-deny filter of the module docstring for ``machine`` (default: this one), allowing the entries
    of :data:`SYSCALLS` in ``scopes``."""
    lib = _lib()
    machine = machine or os.uname().machine
    if machine not in ARCHITECTURES:
        raise SeccompUnavailable(
            f"no seccomp filter for architecture {machine!r} (built for {', '.join(ARCHITECTURES)})"
        )
    f = lib.SyscallFilter(lib.ERRNO(errno.EPERM))
    arch = getattr(lib.Arch, ARCHITECTURES[machine])
    if arch != lib.system_arch():
        f.add_arch(arch)
        f.remove_arch(lib.Arch.NATIVE)
    f.set_attr(lib.Attr.ACT_BADARCH, lib.KILL_PROCESS)
    f.set_attr(lib.Attr.CTL_OPTIMIZE, 2)  # a binary tree: a few comparisons per syscall, not one per rule
    f.add_rule(lib.ERRNO(errno.ENOSYS), "clone3")
    unconditional = {
        n for n, scope, _, when in SYSCALLS if scope in scopes and (when is None or (when == () and "worker" in scopes))
    }
    ruled = {"clone3"} | {n for n, scope, _, _ in SYSCALLS if scope in scopes}
    for name, scope, _, when in SYSCALLS:
        if scope not in scopes or not _resolvable(lib, name, arch):
            continue
        if when is None or (when == () and "worker" in scopes):  # the base filter leaves "own pid" to the child's
            f.add_rule(lib.ALLOW, name)
        elif name not in unconditional and when != ():  # else allowed with any arguments by another entry
            for alternative in when:
                f.add_rule(lib.ALLOW, name, *_args(lib, alternative))
    for name, when in NAMED_REFUSALS:
        if name not in unconditional and name in ruled and _resolvable(lib, name, arch):
            for alternative in when or ():
                f.add_rule(lib.ERRNO(REFUSED_ERRNO + lib.resolve_syscall(arch, name)), name, *_args(lib, alternative))
    for name, answer, _ in ANSWERED:
        if _resolvable(lib, name, arch):
            f.add_rule(lib.ERRNO(answer), name)
            ruled.add(name)
    for nr in range(_MAX_NR + 1):  # every other syscall this architecture has: refused, named by its errno
        name = _name(lib, arch, nr)
        if name is not None and name not in ruled and _resolvable(lib, name, arch):
            f.add_rule(lib.ERRNO(REFUSED_ERRNO + nr), name)
    return f


def _name(lib: Any, arch: Any, nr: int) -> str | None:
    try:
        return lib.resolve_syscall(arch, nr).decode()
    except ValueError:
        return None


def refused_syscall(text: str | None, machine: str | None = None) -> str | None:
    """The syscall a refusal names in ``text`` (``[Errno N]`` with N = :data:`REFUSED_ERRNO` + its number, as
    Python words an ``OSError``), or None when it names none."""
    match = _REFUSED.search(text or "")
    if match is None:
        return None
    nr = int(match.group(1)) - REFUSED_ERRNO
    if not 0 <= nr <= _MAX_NR:
        return None
    lib = _lib()
    return _name(lib, getattr(lib.Arch, ARCHITECTURES.get(machine or os.uname().machine, "X86_64")), nr)


_REFUSED = re.compile(r"\[Errno (3[0-9]{3})\]")


def base_filter(machine: str | None = None) -> Any:
    """The worker's base filter (inherited by every child, under the child filter): the whole table."""
    return _new(machine, ("child", "worker"))


def child_filter(machine: str | None = None, pid: int | None = None) -> Any:
    """The child filter; with ``pid``, complete (``tkill``/``tgkill`` only on that thread group), without
    it, the part the worker prepares before forking (:func:`with_pid` completes it)."""
    f = _new(machine, ("child",))
    return f if pid is None else with_pid(f, pid)


def with_pid(f: Any, pid: int) -> Any:
    """Add to a prepared child filter: ``tkill``/``tgkill`` only on ``pid``'s thread group (arg0: the tid
    for ``tkill`` — the main thread's tid is the pid — the tgid for ``tgkill``)."""
    lib = _lib()
    for name in ("tkill", "tgkill"):
        f.add_rule(lib.ALLOW, name, lib.Arg(0, lib.EQ, pid))
    return f


def _condition(index: int, op: str, value: Any) -> str:
    if op == "masked":
        return f"arg{index} & {hex(value[0])} == {hex(value[1])}"
    if op == "masked0":
        return f"arg{index} & {hex(value)} == 0"
    return f"arg{index} {'==' if op.startswith('eq') else '!='} {value}"


def table_markdown() -> str:
    """The allowlist as a Markdown table (``docs/environments.md`` holds its output)."""
    lines = ["| syscall | allowed to | arguments | why |", "|---|---|---|---|"]
    for name, scope, reason, when in SYSCALLS:
        if when is None:
            cond = "any"
        elif when == ():
            cond = "own pid only"
        else:
            cond = " or ".join(" and ".join(_condition(i, op, v) for i, op, v in alt) for alt in when)
        lines.append(f"| `{name}` | {'worker, child' if scope == 'child' else 'worker'} | {cond} | {reason} |")
    for name, answer, reason in ANSWERED:
        lines.append(f"| `{name}` | answered `{errno.errorcode[answer]}` | any | {reason} |")
    return "\n".join(lines) + "\n"


def export_bpf(f: Any) -> bytes:
    """The compiled BPF program of filter ``f`` (8-byte ``sock_filter`` instructions, native byte order)."""
    with tempfile.TemporaryFile() as out:
        f.export_bpf(out)
        out.seek(0)
        return out.read()


_PROGRAM: list[tuple[bytes, tuple[int, ...]]] = []  # its BPF for PID_SENTINEL, where the sentinel is
_LIBC: list[Any] = []
PID_SENTINEL = 0x3FFFFFF1  # a pid no process has (pid_max is at most 2**22): replaced by the child's own
_JMP_K = 0x05  # BPF_JMP class (0x05) with a constant operand (BPF_K = 0)


def program_for(pid: int) -> bytes | None:
    """The child filter's BPF for ``pid``: the program compiled once for :data:`PID_SENTINEL` with the pid written
    where the sentinel was (byte for byte libseccomp's for pids from 2 on, which a test holds). None before
    :func:`prepare`, or for pid 0 or 1 (never a child's)."""
    if not _PROGRAM or pid < 2:
        return None
    program, where = _PROGRAM[0]
    out = bytearray(program)
    for offset in where:
        out[offset + 4 : offset + 8] = pid.to_bytes(4, sys.byteorder)
    return bytes(out)


def prepare() -> None:
    """Compile the child filter's program once, in the worker before forking."""
    if not _PROGRAM:
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


def non_dumpable() -> None:
    """``PR_SET_DUMPABLE 0`` on the calling process (the worker, inherited by its children): no process of the
    same uid may open its ``/proc/<pid>/mem``, ``fd/*``…, ptrace it or read its memory, and neither may the children
    read each other's."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise SeccompUnavailable(f"prctl(PR_SET_DUMPABLE) failed: errno {ctypes.get_errno()}")


def install_base() -> None:
    """Install the base filter on the calling process (the worker; irreversible)."""
    try:
        base_filter().load()
    except OSError as exc:
        raise SeccompUnavailable(f"the kernel refused the seccomp filter: {exc}") from exc


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install() -> None:
    """Install the child filter on the calling process (irreversible; ``no_new_privs`` is set by the base filter)
    for its own pid: the program the worker compiled (:func:`program_for`), or compiled here."""
    prepare()
    program = program_for(os.getpid()) or export_bpf(child_filter(pid=os.getpid()))
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    if _LIBC[0].prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        raise SeccompUnavailable(f"the kernel refused the seccomp filter: errno {ctypes.get_errno()}")
