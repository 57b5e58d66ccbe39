"""The seccomp filters as libseccomp compiles them, per architecture: the exported BPF program is run
by a small classic-BPF interpreter on every syscall number, so the test holds the per-architecture
numbers (the kernel's, listed below) and the action of every rule without running on that machine."""

from __future__ import annotations

import ctypes.util
import errno
import struct
import sys

import pytest

from pipeline.execution import seccomp

AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
ALLOW, KILL_PROCESS = 0x7FFF0000, 0x80000000
EPERM, ENOSYS = 0x00050000 | errno.EPERM, 0x00050000 | errno.ENOSYS
ENOTSUP = 0x00050000 | errno.EOPNOTSUPP


def REFUSED(nr: int) -> int:
    """The action refusing syscall ``nr`` by name: errno REFUSED_ERRNO + nr."""
    return 0x00050000 | (seccomp.REFUSED_ERRNO + nr)


# the kernel's syscall numbers (x86_64: arch/x86/entry/syscalls/syscall_64.tbl; aarch64: the generic table)
NUMBERS = {
    "x86_64": {
        "fork": 57,
        "vfork": 58,
        "execve": 59,
        "execveat": 322,
        "ptrace": 101,
        "process_vm_readv": 310,
        "process_vm_writev": 311,
        "kill": 62,
        "mount": 165,
        "umount2": 166,
        "unshare": 272,
        "setns": 308,
        "pivot_root": 155,
        "chroot": 161,
        "bpf": 321,
        "perf_event_open": 298,
        "keyctl": 250,
        "add_key": 248,
        "request_key": 249,
        "mknod": 133,
        "mknodat": 259,
        "setxattr": 188,
        "lsetxattr": 189,
        "fsetxattr": 190,
        "removexattr": 197,
        "lremovexattr": 198,
        "fremovexattr": 199,
        "io_uring_setup": 425,
        "userfaultfd": 323,
        "memfd_create": 319,
        "pidfd_open": 434,
        "pidfd_send_signal": 424,
        "pidfd_getfd": 438,
        "rt_sigqueueinfo": 129,
        "rt_tgsigqueueinfo": 297,
        "process_madvise": 440,
        "process_mrelease": 448,
        "kcmp": 312,
        "clone": 56,
        "clone3": 435,
        "tkill": 200,
        "tgkill": 234,
        "prlimit64": 302,
        "fcntl": 72,
        "read": 0,
        "write": 1,
        "openat": 257,
        "mmap": 9,
        "futex": 202,
        "getpid": 39,
        "wait4": 61,
        "memfd_secret": 447,
        "shmget": 29,
        "shmat": 30,
        "shmctl": 31,
        "shmdt": 67,
        "semget": 64,
        "semop": 65,
        "semctl": 66,
        "semtimedop": 220,
        "msgget": 68,
        "msgsnd": 69,
        "msgrcv": 70,
        "msgctl": 71,
        "setpriority": 141,
        "sched_setparam": 142,
        "sched_setscheduler": 144,
        "sched_setaffinity": 203,
        "sched_setattr": 314,
        "ioprio_set": 251,
        "migrate_pages": 256,
        "move_pages": 279,
        "mq_open": 240,
        "mq_unlink": 241,
        "mq_timedsend": 242,
        "mq_timedreceive": 243,
        "mq_notify": 244,
        "mq_getsetattr": 245,
        "flock": 73,
        "inotify_init": 253,
        "inotify_init1": 294,
        "fanotify_init": 300,
    },
    "aarch64": {
        "execve": 221,
        "execveat": 281,
        "ptrace": 117,
        "process_vm_readv": 270,
        "process_vm_writev": 271,
        "kill": 129,
        "mount": 40,
        "umount2": 39,
        "unshare": 97,
        "setns": 268,
        "pivot_root": 41,
        "chroot": 51,
        "bpf": 280,
        "perf_event_open": 241,
        "keyctl": 219,
        "add_key": 217,
        "request_key": 218,
        "mknodat": 33,
        "setxattr": 5,
        "lsetxattr": 6,
        "fsetxattr": 7,
        "removexattr": 14,
        "lremovexattr": 15,
        "fremovexattr": 16,
        "io_uring_setup": 425,
        "userfaultfd": 282,
        "memfd_create": 279,
        "pidfd_open": 434,
        "pidfd_send_signal": 424,
        "pidfd_getfd": 438,
        "rt_sigqueueinfo": 138,
        "rt_tgsigqueueinfo": 240,
        "process_madvise": 440,
        "process_mrelease": 448,
        "kcmp": 272,
        "clone": 220,
        "clone3": 435,
        "tkill": 130,
        "tgkill": 131,
        "prlimit64": 261,
        "fcntl": 25,
        "read": 63,
        "write": 64,
        "openat": 56,
        "mmap": 222,
        "futex": 98,
        "getpid": 172,
        "wait4": 260,
        "memfd_secret": 447,
        "shmget": 194,
        "shmat": 196,
        "shmctl": 195,
        "shmdt": 197,
        "semget": 190,
        "semop": 193,
        "semctl": 191,
        "semtimedop": 192,
        "msgget": 186,
        "msgsnd": 189,
        "msgrcv": 188,
        "msgctl": 187,
        "setpriority": 140,
        "sched_setparam": 118,
        "sched_setscheduler": 119,
        "sched_setaffinity": 122,
        "sched_setattr": 274,
        "ioprio_set": 30,
        "migrate_pages": 238,
        "move_pages": 239,
        "mq_open": 180,
        "mq_unlink": 181,
        "mq_timedsend": 182,
        "mq_timedreceive": 183,
        "mq_notify": 184,
        "mq_getsetattr": 185,
        "flock": 32,
        "inotify_init1": 26,
        "fanotify_init": 262,
    },
}
ALLOWED = ("read", "write", "openat", "mmap", "futex", "getpid")
PID = 4242
SELF_ONLY = (
    "prlimit64",
    "sched_setaffinity",
    "sched_setscheduler",
    "sched_setparam",
    "sched_setattr",
    "migrate_pages",
    "move_pages",
)
assert set(SELF_ONLY) <= {n for n, scope, _, when in seccomp.SYSCALLS if scope == "child" and when == seccomp._SELF}
CLONE_THREAD, CLONE_NEWUSER, CLONE_NEWNET = 0x10000, 0x10000000, 0x40000000


def _run(program: bytes, nr: int, arch: int, args: tuple[int, ...] = ()) -> int:
    """The action a classic-BPF seccomp program returns for one syscall (loads, ALU, jumps, returns)."""
    data = struct.pack("<iIQ6Q", nr, arch, 0, *(list(args) + [0] * 6)[:6])
    ins = [struct.unpack_from("<HBBI", program, i) for i in range(0, len(program), 8)]
    a = x = pc = 0
    mem = [0] * 16
    while True:
        code, jt, jf, k = ins[pc]
        pc += 1
        cls, src = code & 7, (x if code & 8 else k)
        if cls == 0:  # BPF_LD: W|ABS, IMM or MEM
            a = {0x20: lambda: struct.unpack_from("<I", data, k)[0], 0x00: lambda: k, 0x60: lambda: mem[k]}[
                code & 0xE0
            ]()
        elif cls == 1:  # BPF_LDX
            x = k if code & 0xE0 == 0 else mem[k]
        elif cls in (2, 3):  # BPF_ST, BPF_STX
            mem[k] = a if cls == 2 else x
        elif cls == 4:  # BPF_ALU
            ops = {0x00: a + src, 0x10: a - src, 0x50: a & src, 0x40: a | src, 0xA0: a ^ src, 0x80: -a}
            a = ops[code & 0xF0] & 0xFFFFFFFF
        elif cls == 5:  # BPF_JMP
            if code & 0xF0 == 0:
                pc += k
            else:
                pc += jt if {0x10: a == src, 0x20: a > src, 0x30: a >= src, 0x40: bool(a & src)}[code & 0xF0] else jf
        elif cls == 6:  # BPF_RET
            return a if code & 0x18 == 0x10 else k
        else:  # BPF_MISC: TAX / TXA
            x, a = (a, a) if code & 0xF8 == 0 else (x, x)


@pytest.fixture(params=sorted(AUDIT_ARCH))
def machine(request) -> str:
    return request.param


def _programs(machine: str) -> tuple[bytes, bytes]:
    return (
        seccomp.export_bpf(seccomp.base_filter(machine)),
        seccomp.export_bpf(seccomp.child_filter(machine, pid=PID)),
    )


def _allowed_with_zero_args(machine: str, scopes: tuple[str, ...]) -> set[int]:
    """Syscall numbers (libseccomp's table) the allowlist admits when every argument is 0."""
    import pyseccomp

    arch = getattr(pyseccomp.Arch, seccomp.ARCHITECTURES[machine])
    out = set()
    for name, scope, _, when in seccomp.SYSCALLS:
        if scope not in scopes:
            continue
        ok = (
            when is None
            or (when == () and "worker" in scopes)
            or any(
                all(
                    (op == "eq32" and v & 0xFFFFFFFF == 0)
                    or (op == "eq" and v == 0)
                    or op == "masked0"
                    or (op == "masked" and v[1] == 0)
                    for _, op, v in alt
                )
                for alt in when
            )
        )
        nr = pyseccomp.resolve_syscall(arch, name)
        if ok and nr >= 0:
            out.add(nr)
    return out


def test_default_deny_only_the_table_is_allowed_on_each_architecture(machine):
    """Every syscall number outside the one table is refused naming itself (errno REFUSED_ERRNO + its number;
    clone3 ENOSYS; the answered ones their errno; an unknown number EPERM), so one the kernel adds later is
    refused by construction; the table's entries are allowed."""
    base, child = _programs(machine)
    nr, arch = NUMBERS[machine], AUDIT_ARCH[machine]
    listed = {name for name, _, _, _ in seccomp.SYSCALLS} | {"clone3"}
    answered = {name: 0x00050000 | answer for name, answer, _ in seccomp.ANSWERED}
    for name in sorted(set(nr) - listed):  # the notable ones outside the table, named
        expected = answered.get(name, REFUSED(nr[name]))
        assert (_run(child, nr[name], arch), _run(base, nr[name], arch)) == (expected, expected), name
    for program in (base, child):
        assert _run(program, nr["clone3"], arch) == ENOSYS
        assert [_run(program, nr[name], arch) for name in ALLOWED] == [ALLOW] * len(ALLOWED)
    assert _run(child, nr["wait4"], arch) == REFUSED(nr["wait4"]) and _run(base, nr["wait4"], arch) == ALLOW
    for program, scopes in ((child, ("child",)), (base, ("child", "worker"))):
        allowed = _allowed_with_zero_args(machine, scopes)
        got = {n for n in range(1024) if _run(program, n, arch) == ALLOW}
        assert got == allowed, sorted(got ^ allowed)
        others = {_run(program, n, arch) & 0xFFFF0000 for n in range(1024) if n not in got}
        assert others == {0x00050000}  # every other number an errno: never allowed, never a kill


# x86_64 numbers outside the table that environment code reached in the red team's corpus
OUTSIDE = {
    "cachestat": 451,
    "mincore": 27,
    "fadvise64": 221,
    "readahead": 187,
    "socket": 41,
    "chown": 92,
    "sync": 162,
    "connect": 42,
    "bind": 49,
    "vfork": 58,
}


def test_channels_of_the_red_team_are_outside_the_child_allowlist():
    base, child = _programs("x86_64")
    arch = AUDIT_ARCH["x86_64"]
    for program in (base, child):
        assert {name: _run(program, n, arch, (1,)) for name, n in OUTSIDE.items()} == {
            name: REFUSED(n) for name, n in OUTSIDE.items()
        }
        assert _run(program, 53, arch, (1,)) == ALLOW and _run(program, 53, arch, (40,)) == EPERM  # AF_UNIX only
        assert _run(program, 99, arch) == ENOSYS  # sysinfo: the preloaded library answers libc
        assert [_run(program, n, arch) for n in (188, 191, 194)] == [ENOTSUP] * 3  # no extended attributes


def test_ordinary_python_runs_and_no_futex_is_keyed_by_a_shared_file(machine):
    """Threads (clone with thread flags only), an event loop (epoll, eventfd, an AF_UNIX pair), modes, times
    and free space of its own files, the lock test; never a read-only shared file mapping nor a shared futex
    wake, requeue or PI operation (the private ones, and a shared wait, stay)."""
    _, child = _programs(machine)
    nr, arch = NUMBERS[machine], AUDIT_ARCH[machine]

    def child_action(name: str, *args: int) -> int:
        return _run(child, nr[name], arch, args)

    threads = 0x3D0F00  # glibc's pthread_create: VM|FS|FILES|SIGHAND|THREAD|SYSVSEM|SETTLS|PARENT/CHILD_*TID
    assert child_action("clone", threads) == ALLOW
    assert child_action("clone", 0x01200011) == REFUSED(nr["clone"])  # fork: a new process, named
    assert child_action("clone", 0x4111) == REFUSED(nr["clone"])  # CLONE_VM|CLONE_VFORK: posix_spawn
    assert child_action("clone", threads | CLONE_NEWNET) == REFUSED(nr["clone"])
    MAP_SHARED, MAP_PRIVATE, MAP_ANONYMOUS, READ, WRITE = 0x01, 0x02, 0x20, 0x01, 0x02
    assert child_action("mmap", 0, 4096, READ, MAP_SHARED, 3) == REFUSED(nr["mmap"])  # a read-only shared file
    assert child_action("mmap", 0, 4096, READ, MAP_SHARED | 0x02, 3) == REFUSED(nr["mmap"])  # MAP_SHARED_VALIDATE
    assert child_action("mmap", 0, 4096, READ | WRITE, MAP_SHARED, 3) == ALLOW  # its own file (sqlite's WAL index)
    assert child_action("mmap", 0, 4096, READ, MAP_PRIVATE, 3) == ALLOW
    assert child_action("mmap", 0, 4096, READ, MAP_SHARED | MAP_ANONYMOUS, (1 << 64) - 1) == ALLOW
    FUTEX_WAIT, FUTEX_WAKE, FUTEX_REQUEUE, FUTEX_WAIT_BITSET, FUTEX_LOCK_PI, PRIVATE, REALTIME = 0, 1, 3, 9, 6, 128, 256
    assert [child_action("futex", 0, op | PRIVATE) for op in (FUTEX_WAIT, FUTEX_WAKE, FUTEX_REQUEUE)] == [ALLOW] * 3
    assert [child_action("futex", 0, op) for op in (FUTEX_WAIT, FUTEX_WAIT_BITSET | REALTIME)] == [ALLOW] * 2
    shared = [child_action("futex", 0, op) for op in (FUTEX_WAKE, FUTEX_REQUEUE, FUTEX_LOCK_PI, FUTEX_WAKE | REALTIME)]
    assert shared == [REFUSED(nr["futex"])] * 4


def test_the_table_documents_every_entry():
    table = seccomp.table_markdown()
    assert all(reason and f"`{name}`" in table for name, _, reason, _ in seccomp.SYSCALLS)
    assert {scope for _, scope, _, _ in seccomp.SYSCALLS} == {"child", "worker"}


def test_other_architectures_and_x32_kill_the_process(machine):
    for program in _programs(machine):
        for other in set(AUDIT_ARCH.values()) - {AUDIT_ARCH[machine]} | {0x40000003}:  # and i386
            assert _run(program, NUMBERS[machine]["read"], other) == KILL_PROCESS
        if machine == "x86_64":
            assert _run(program, 0x40000000 | 1, AUDIT_ARCH[machine]) == KILL_PROCESS  # x32 write


def test_argument_conditions(machine):
    base, child = _programs(machine)
    nr, arch = NUMBERS[machine], AUDIT_ARCH[machine]

    def child_action(name: str, *args: int) -> int:
        return _run(child, nr[name], arch, args)

    assert child_action("clone", CLONE_THREAD | 0x0F00) == ALLOW  # a thread
    assert child_action("clone", 0x11) == REFUSED(nr["clone"])  # fork-like: no new process
    assert _run(base, nr["clone"], arch, (0x11,)) == ALLOW  # the worker forks
    for flag in (CLONE_NEWUSER, CLONE_NEWNET, 0x00020000):  # no namespace, even for a thread
        assert _run(base, nr["clone"], arch, (CLONE_THREAD | flag,)) == REFUSED(nr["clone"])
    assert [child_action(n, PID, PID) for n in ("tkill", "tgkill")] == [ALLOW, ALLOW]
    assert [child_action(n, PID + 1, PID + 1) for n in ("tkill", "tgkill")] == [EPERM, EPERM]
    assert [child_action(n, 1 << 32 | PID + 1) for n in ("tkill", "tgkill")] == [EPERM, EPERM]
    for name in SELF_ONLY:  # prlimit, scheduling, affinity, page migration: only on itself
        assert (child_action(name, 0), child_action(name, PID), child_action(name, 1 << 32)) == (ALLOW, EPERM, EPERM)
        assert _run(base, nr[name], arch, (PID,)) == EPERM, name  # nor the worker: it needs none on another
    PRIO_PROCESS, PRIO_PGRP, PRIO_USER, IOPRIO_WHO_PROCESS, IOPRIO_WHO_USER = 0, 1, 2, 1, 3
    assert [
        child_action("setpriority", which, who, 19)
        for which, who in ((PRIO_PROCESS, 0), (PRIO_PROCESS, PID), (PRIO_PGRP, 0), (PRIO_USER, 0), (PRIO_USER, 65534))
    ] == [ALLOW] + [EPERM] * 4
    assert [
        child_action("ioprio_set", which, who, 3 << 13)
        for which, who in ((IOPRIO_WHO_PROCESS, 0), (IOPRIO_WHO_PROCESS, PID), (0, 0), (2, 0), (IOPRIO_WHO_USER, 0))
    ] == [ALLOW] + [EPERM] * 4
    assert [child_action("fcntl", 3, cmd) for cmd in (8, 15, 0xFFFFFFFF00000008, 1, 2, 4)] == [EPERM] * 3 + [ALLOW] * 3
    # no OFD lock test, lease or F_NOTIFY; taking a lock (F_SETLK(W), F_OFD_SETLK(W)) and F_GETLK (sqlite) stay
    assert [child_action("fcntl", 3, cmd) for cmd in (36, 1024, 1026, 5, 6, 7, 37, 38)] == [EPERM] * 3 + [ALLOW] * 5


def test_the_prepared_child_filter_takes_its_pid_in_the_child():
    """The worker prepares the child filter once, without a pid; a child adds its pid rules (to its own
    copy of the worker's memory) and gets the same program as a filter built for that pid."""
    prepared = seccomp.child_filter("x86_64")
    without = seccomp.export_bpf(prepared)
    assert _run(without, 234, AUDIT_ARCH["x86_64"], (PID,)) == EPERM  # no tgkill at all before the pid
    full = seccomp.export_bpf(seccomp.with_pid(prepared, PID))
    assert _run(full, 234, AUDIT_ARCH["x86_64"], (PID + 1,)) == EPERM
    assert _run(full, 234, AUDIT_ARCH["x86_64"], (PID,)) == ALLOW
    assert full == seccomp.export_bpf(seccomp.child_filter("x86_64", pid=PID))


def test_the_child_program_compiled_once_with_a_pid_sentinel_is_libseccomps_for_each_pid():
    """A child writes its pid into the program the worker compiled once (no libseccomp compile per child):
    byte for byte the program libseccomp compiles for that pid."""
    seccomp.prepare()
    for pid in (2, 3, 300, 4242, 65535, 99999, 4194304):
        assert seccomp.program_for(pid) == seccomp.export_bpf(seccomp.child_filter(pid=pid)), pid
    assert seccomp.program_for(1) is None  # libseccomp folds pid 0/1 into other comparisons: compiled then


def test_a_missing_libseccomp_fails_naming_the_package_to_install(monkeypatch):
    find = ctypes.util.find_library
    monkeypatch.delitem(sys.modules, "pyseccomp", raising=False)
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None if name == "seccomp" else find(name))
    with pytest.raises(seccomp.SeccompUnavailable, match=r"needs libseccomp .*apt-get install libseccomp2"):
        seccomp.install_base()
    monkeypatch.setitem(sys.modules, "pyseccomp", None)  # the Python binding itself missing
    with pytest.raises(seccomp.SeccompUnavailable, match=r"needs the Python package 'pyseccomp'"):
        seccomp.base_filter()


def test_a_refusal_names_its_syscall_as_python_words_it():
    assert seccomp.refused_syscall("OSError: [Errno 3128] Unknown error 3128", "x86_64") == "clone"
    assert seccomp.refused_syscall("[Errno 3113] Unknown error 3113: 'x'", "x86_64") == "socket"
    assert seccomp.refused_syscall("[Errno 1] Operation not permitted", "x86_64") is None
    assert seccomp.refused_syscall(None) is None
