"""Only yourself (issue 33, item 2): scheduling, priority, affinity and I/O-priority syscalls act on the
calling child only; ``memfd_secret``, SysV IPC (shared memory, message queues, semaphores) and POSIX
message queues are refused.

Each channel is tried by environment code in the real sandbox where Python reaches it without ctypes
(``os.setpriority``, ``os.sched_setaffinity``, ``os.sched_setscheduler``), and by raw syscalls in a
forked process under the real child filter on this kernel (``ioprio_set``, ``memfd_secret``, ``shmget``,
``msgget``, ``semget``, ``mq_open`` have no Python API; in the sandbox ctypes is also refused by the audit hook, which
is not the boundary). In both, the worker's (parent's) nice value, scheduling policy, CPU affinity and
I/O priority are read from ``/proc`` and the kernel before and after: none changed."""

from __future__ import annotations

import ctypes
import errno
import json
import os

from pipeline.core.trajectory import Action, Trajectory
from pipeline.envs import envscaler
from pipeline.execution import seccomp
from pipeline.execution.child import Limits
from pipeline.execution.sandbox import Sandbox

ENV_CODE = r'''
import errno, os

def _parent_view(pid):
    """Nice, scheduling policy and CPU affinity of ``pid``, as /proc shows them (Landlock: not to a child)."""
    try:
        fh = open(f"/proc/{pid}/stat")
    except OSError:
        return "refused"
    with fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    with open(f"/proc/{pid}/status") as fh:
        cpus = [l.split()[1] for l in fh if l.startswith("Cpus_allowed_list")][0]
    return {"nice": int(fields[16]), "policy": int(fields[38]), "cpus": cpus}

class Bully:
    def __init__(self, init_config=None):
        self.n = 0

    def push(self):
        """Tries to change the worker (its parent) and every process of its group and user."""
        parent = os.getppid()
        before = _parent_view(parent)
        out = {}

        def attempt(name, fn, *args):
            try:
                fn(*args)
                out[name] = "ok"
            except OSError as exc:
                out[name] = errno.errorcode.get(exc.errno, str(exc.errno))

        attempt("setpriority_parent", os.setpriority, os.PRIO_PROCESS, parent, 19)
        attempt("setpriority_group", os.setpriority, os.PRIO_PGRP, 0, 19)
        attempt("setpriority_user", os.setpriority, os.PRIO_USER, 54321, 19)  # a uid with no process
        attempt("affinity_parent", os.sched_setaffinity, parent, {0})
        attempt("scheduler_parent", os.sched_setscheduler, parent, os.SCHED_BATCH, os.sched_param(0))
        attempt("param_parent", os.sched_setparam, parent, os.sched_param(0))
        attempt("setpriority_self", os.setpriority, os.PRIO_PROCESS, 0, 5)
        attempt("affinity_self", os.sched_setaffinity, 0, os.sched_getaffinity(0))
        attempt("scheduler_self", os.sched_setscheduler, 0, os.SCHED_BATCH, os.sched_param(0))
        out["before"], out["after"] = before, _parent_view(parent)
        out["ipc_ns"] = os.readlink("/proc/self/ns/ipc")
        return out
'''


def _traj(tid: str) -> Trajectory:
    item = envscaler.parse_env_item("bully", {"env_class_name": "Bully", "env_class_code": ENV_CODE})
    assert not item.problems, item.problems
    return Trajectory(tid, "task", item.spec({}), (Action("push", {}, turn=0),))


def test_in_the_sandbox_priority_affinity_and_policy_act_on_the_child_only():
    import ast

    from tests.support.procs import descendants

    with Sandbox(workers=1, limits=Limits(call_timeout_s=10, memory_mb=512, tmp_mb=48)) as box:
        [(_, result)] = list(box.run([_traj("bully")]))
        views = []  # the sandbox's processes seen from outside (the child cannot read /proc)
        for worker in box._all:
            for pid in descendants(worker.proc.pid)[:3]:  # bwrap's init, the worker, its zygote
                try:
                    stat = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                views.append((int(stat[16]), int(stat[38])))
    assert result["init"] is not None, result["init_error"]
    out = ast.literal_eval(result["steps"][0]["raw_observation"])
    assert out["after"] == out["before"] == "refused", out
    assert views and set(views) == {(0, 0)}, views  # the worker's (and zygote's) nice and policy are untouched
    assert out.pop("ipc_ns") != os.readlink("/proc/self/ns/ipc")  # the worker's own IPC namespace (bwrap)
    refused = (
        "setpriority_parent",
        "setpriority_group",
        "setpriority_user",
        "affinity_parent",
        "scheduler_parent",
        "param_parent",
    )
    assert {k: out[k] for k in refused} == {k: "EPERM" for k in refused}
    # on itself a child may lower its own priority or pin itself: that only slows itself
    assert {k: out[k] for k in ("setpriority_self", "affinity_self", "scheduler_self")} == {
        "setpriority_self": "ok",
        "affinity_self": "ok",
        "scheduler_self": "ok",
    }


_IOPRIO_WHO_PROCESS, _IOPRIO_CLASS_IDLE = 1, 3


def _under_child_filter(parent: int) -> dict:
    """In a forked process under the real child filter: each raw syscall's errno (0: it succeeded)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        created: dict[str, list[int]] = {}
        queue = ctypes.create_string_buffer(b"q-issue33-" + str(os.getpid()).encode())
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        import pyseccomp

        nr = lambda name: pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, name)
        try:
            os.close(r)

            seccomp.install()

            def call(name, *args):
                ctypes.set_errno(0)
                res = libc.syscall(ctypes.c_long(nr(name)), *[ctypes.c_long(a) for a in args])
                if res >= 0 and (name.endswith("get") or name == "mq_open"):
                    created.setdefault(name[:3], []).append(res)
                return 0 if res >= 0 else ctypes.get_errno()

            ioprio = _IOPRIO_CLASS_IDLE << 13
            out = {
                "ioprio_set_parent": call("ioprio_set", _IOPRIO_WHO_PROCESS, parent, ioprio),
                "ioprio_set_user": call("ioprio_set", 3, 54321, ioprio),  # IOPRIO_WHO_USER, a uid with no process
                "ioprio_set_self": call("ioprio_set", _IOPRIO_WHO_PROCESS, 0, 0),
                "sched_setattr_parent": call("sched_setattr", parent, 0, 0),
                "memfd_secret": call("memfd_secret", 0),
                "shmget": call("shmget", 0, 900 << 20, 0o1600),  # IPC_PRIVATE, IPC_CREAT|0600
                "msgget": call("msgget", 0, 0o1600),
                "semget": call("semget", 0, 1, 0o1600),
                "shmat": call("shmat", 0, 0, 0),
                "mq_open": call("mq_open", ctypes.addressof(queue), 0o102, 0o600, 0),  # O_CREAT|O_RDWR
                "migrate_pages_parent": call("migrate_pages", parent, 1, 0, 0),
                "ioprio_get_parent": call("ioprio_get", _IOPRIO_WHO_PROCESS, parent),  # only itself, even to read
            }
            os.write(w, json.dumps(out).encode())
        finally:
            for kind, command in (("shm", "shmctl"), ("msg", "msgctl"), ("sem", "semctl")):
                for ident in created.get(kind, []):  # a failing run leaves nothing in this IPC namespace
                    libc.syscall(
                        ctypes.c_long(nr(command)), ctypes.c_long(ident), ctypes.c_long(0), ctypes.c_long(0)
                    )  # IPC_RMID
            if created.get("mq_"):
                libc.syscall(ctypes.c_long(nr("mq_unlink")), ctypes.c_long(ctypes.addressof(queue)))
            os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 4096):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return json.loads(data)


def _ioprio(pid: int) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    import pyseccomp

    return libc.syscall(
        ctypes.c_long(pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, "ioprio_get")),
        ctypes.c_long(_IOPRIO_WHO_PROCESS),
        ctypes.c_long(pid),
    )


def _ipc_objects() -> int:
    """SysV objects of this IPC namespace owned by us (shared memory, queues, semaphores)."""
    uid, n = os.getuid(), 0
    for name in ("shm", "msg", "sem"):
        with open(f"/proc/sysvipc/{name}") as fh:
            header, *rows = fh.read().splitlines()
            col = header.split().index("uid")
            n += sum(1 for row in rows if row.split() and int(row.split()[col]) == uid)
    return n


def test_ioprio_memfd_secret_and_sysv_ipc_are_refused_by_the_child_filter():
    import pyseccomp

    me = os.getpid()
    before = (_ioprio(me), os.getpriority(os.PRIO_PROCESS, me), _ipc_objects())
    out = _under_child_filter(me)
    assert out.pop("ioprio_set_self") == 0  # its own I/O priority: only itself
    unlisted = ("memfd_secret", "shmget", "msgget", "semget", "shmat", "mq_open")  # refused naming themselves
    nr = {name: pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, name) for name in unlisted}
    assert out == {k: seccomp.REFUSED_ERRNO + nr[k] if k in unlisted else errno.EPERM for k in out}, out
    assert (_ioprio(me), os.getpriority(os.PRIO_PROCESS, me), _ipc_objects()) == before
