"""Issue 40 through the real sandbox: the default-deny child filter (a syscall outside the allowlist is
refused even with the audit hook gone), the unprivileged host uid under root, no host identity inside, and
per-trajectory directory names that do not change between runs, machines or checkouts."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.core.trajectory import Action, Trajectory
from pipeline.envs import envscaler
from pipeline.execution import isolation
from pipeline.execution import sandbox as sandbox_module
from pipeline.execution.sandbox import Limits, Sandbox
from tests.support.procs import descendants

PROJECT = Path(__file__).resolve().parents[2]

# What a child does before environment code (both filters, Landlock), then raw syscalls through ctypes —
# as if the audit hook had been switched off (the red team rewrote its defaults): the kernel still refuses.
RAW = r"""
import ctypes, errno, json, os, sys
from pipeline.execution import landlock, seccomp
seccomp.prepare(); landlock.prepare()
seccomp.non_dumpable(); seccomp.install_base()
os.makedirs("/tmp/work/own", exist_ok=True)
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(r)
    landlock.restrict("/tmp/work/own")
    seccomp.install()
    os.chdir("/tmp/work/own")
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    def raw(nr, *args):
        res = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
        code = ctypes.get_errno()
        return "allowed" if res >= 0 else errno.errorcode.get(code, f"refused {code - seccomp.REFUSED_ERRNO}")
    buf = ctypes.create_string_buffer(64)
    dot = ctypes.create_string_buffer(b".")
    fd = os.open(json.__file__, os.O_RDONLY)
    addr = libc.mmap(None, 4096, 1, 2, fd, 0)
    out = {
        "cachestat": raw(451, fd, ctypes.addressof(buf), ctypes.addressof(buf), 0),
        "mincore": raw(27, addr, 4096, ctypes.addressof(buf)),
        "fadvise64": raw(221, fd, 0, 0, 4),
        "socket AF_UNIX": raw(41, 1, 1, 0),
        "socket AF_VSOCK": raw(41, 40, 1, 0),
        "socket AF_INET": raw(41, 2, 1, 0),
        "socketpair AF_UNIX": raw(53, 1, 1, 0, ctypes.addressof(buf)),
        "chmod own dir": raw(90, ctypes.addressof(dot), 0o700),
        "fchmodat2": raw(452, -100, ctypes.addressof(dot), 0o700, 0),
        "chown": raw(92, ctypes.addressof(dot), 0, 0),
        "fork": raw(57),
        "clone without CLONE_THREAD": raw(56, 17, 0, 0, 0, 0),
        "shared read-only file mapping": libc.syscall(ctypes.c_long(9), None, 4096, 1, 1, fd, 0) == -1
        and ctypes.get_errno() - seccomp.REFUSED_ERRNO,
        "shared futex wake": raw(202, addr, 1, 1, 0, 0, 0),
        "pipe2": raw(293, ctypes.addressof(buf), 0),
        "sysinfo": raw(99, ctypes.addressof(buf)),
        "kill worker": raw(62, os.getppid(), 0),
        "getpid": raw(39),
    }
    procs = ("/proc/self/mem", "/proc/1/cmdline", "/proc/cmdline", "/proc/self/mountinfo", f"/proc/{os.getppid()}/comm")
    for path in procs:
        try:
            os.close(os.open(path, os.O_RDONLY))
            out[path] = "allowed"
        except OSError as exc:
            out[path] = errno.errorcode[exc.errno]
    os.write(w, json.dumps(out).encode())
    os._exit(0)
os.close(w)
os.waitpid(pid, 0)
print(os.read(r, 1 << 16).decode())
"""


def _inside(script: str) -> str:
    opts = isolation._Options()
    interpreter = isolation.interpreter_layout(opts)[0]
    for fd in opts.fds:
        os.close(fd)
    launch = isolation.bwrap_command(64, [interpreter, "-P", "-c", script])
    try:
        proc = subprocess.run(launch.argv, pass_fds=launch.pass_fds, capture_output=True, text=True, timeout=60)
    finally:
        launch.close()
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_syscalls_outside_the_allowlist_are_refused_in_the_real_sandbox_even_without_the_audit_hook():
    out = json.loads(_inside(RAW))
    procs = {k: out.pop(k) for k in list(out) if k.startswith("/proc")}
    assert out == {
        "cachestat": "refused 451",  # each refused with an errno naming it (3072 + its number)
        "mincore": "refused 27",
        "fadvise64": "refused 221",
        "socket AF_UNIX": "refused 41",  # no socket of any family
        "socket AF_VSOCK": "refused 41",
        "socket AF_INET": "refused 41",
        "socketpair AF_UNIX": "allowed",  # an event loop's self-pipe, inside the process
        "chmod own dir": "allowed",
        "fchmodat2": "allowed",
        "chown": "refused 92",
        "fork": "refused 57",
        "clone without CLONE_THREAD": "refused 56",  # a new process, named
        "shared read-only file mapping": 9,  # mmap refused, named
        "shared futex wake": "refused 202",  # on a file's page: the channel between instances
        "pipe2": "allowed",
        "sysinfo": "ENOSYS",  # libc's answer comes from the preloaded library
        "kill worker": "refused 62",
        "getpid": "allowed",
    }, out
    assert procs == {k: "EACCES" for k in procs}, procs  # Landlock: /proc is not readable


def _spec(env_id: str, code: str, cls: str):
    item = envscaler.parse_env_item(env_id, {"env_class_name": cls, "env_class_code": code})
    assert not item.problems, item.problems
    return item.spec({})


IDENTITY = r'''
import os, sys, tempfile

class Where:
    def __init__(self, init_config=None):
        self.cwd = os.getcwd()
        self.tmp = tempfile.gettempdir()
        fd, self.temp_file = tempfile.mkstemp()
        os.close(fd)
        self.home = os.environ.get("HOME")

    def where(self):
        """What an environment can tell about the machine it runs on."""
        out = {"exe": sys.executable, "prefix": sys.prefix, "base": sys.base_prefix, "path": sys.path,
               "file": os.__file__, "cwd": os.getcwd(), "env": dict(os.environ), "uid": os.getuid()}
        for path in ("/proc/cmdline", "/proc/1/cmdline", "/proc/self/mountinfo", "/proc/version"):
            try:
                with open(path) as fh:
                    out[path] = fh.read()
            except OSError as exc:
                out[path] = type(exc).__name__
        return {"success": True, "data": out}
'''


def _where(box: Sandbox, tid: str = "where/0") -> dict:
    t = Trajectory(tid, "task", _spec("probe/where", IDENTITY, "Where"), (Action("where", {}, turn=0),))
    [(_, result)] = list(box.run([t]))
    assert result["init"] is not None, result["init_error"]
    return result


def _comparable(result: dict) -> str:
    steps = [{k: v for k, v in s.items() if k != "call_seconds"} for s in result["steps"]]
    return json.dumps({**result, "steps": steps}, sort_keys=True)


def test_an_environment_sees_no_host_path_and_stores_the_same_directories_on_every_run():
    with Sandbox(workers=1, limits=Limits(call_timeout_s=10)) as box:
        first, again = _where(box), _where(box)
    text = _comparable(first)
    host = {
        str(PROJECT),
        os.path.realpath(sys.prefix),
        os.path.realpath(sys.base_prefix),
        "/root/",
        str(PROJECT.parent),
    }
    state = json.loads(first["init"]["state_json"])
    # a directory the sandbox has of its own (a checkout in /tmp: its parent is above the sandbox's /tmp/work) tells
    # nothing about the host
    host = {h for h in host if not (state["cwd"] + "/").startswith(h.rstrip("/") + "/")}
    # a host path as whole path components: /work (the checkout's parent) must not match the sandbox's /tmp/work
    seen = [h for h in host if re.search(r"(?<![\w.-])" + re.escape(h.rstrip("/")) + r"(?![\w.-])", text)]
    assert seen == []
    assert "BOOT_IMAGE" not in text and "console=" not in text
    assert state["cwd"] == state["tmp"] == state["home"] and state["temp_file"].startswith(state["cwd"] + "/tmp")
    assert _comparable(again) == text  # cwd, gettempdir, mkstemp: the same names on re-execution


def test_labels_from_two_checkouts_at_different_paths_are_byte_identical(tmp_path, monkeypatch):
    results = []
    for name in ("a/checkout", "b/elsewhere/envsim-forge"):
        root = tmp_path / name
        root.mkdir(parents=True)
        shutil.copytree(PROJECT / "pipeline", root / "pipeline", ignore=shutil.ignore_patterns("__pycache__"))
        os.chmod(tmp_path, 0o755)
        for p in [root, *root.parents]:
            if str(p).startswith(str(tmp_path)):
                os.chmod(p, 0o755)
        monkeypatch.setattr(isolation, "_PROJECT_ROOT", root)
        with Sandbox(workers=1, limits=Limits(call_timeout_s=10)) as box:
            results.append(_comparable(_where(box)))
    assert results[0] == results[1]
    assert str(tmp_path) not in results[0]


def _probes(n: int) -> list[Trajectory]:
    """``n`` environments of corpus code (each its own instance), one trajectory each."""
    return [
        Trajectory(
            f"probe/{i}",
            "task",
            _spec(f"probe/{i}", IDENTITY.replace("class Where", f"N = {i}\n\nclass Where"), "Where"),
            (Action("where", {}, turn=0),),
        )
        for i in range(n)
    ]


@pytest.mark.skipif(os.geteuid() != 0, reason="the unprivileged-uid switch is for a pipeline running as root")
def test_under_root_every_sandbox_has_a_non_zero_host_uid_of_its_own():
    with Sandbox(workers=2, limits=Limits(call_timeout_s=10)) as box:
        results = [r for _, r in box.run(_probes(3))]
        seen = {}
        for worker in box._all:  # the shared worker and the three instances (kept idle for their environments)
            for pid in descendants(worker.proc.pid):
                status = Path(f"/proc/{pid}/status").read_text()
                if status.split("\n", 1)[0].split(":", 1)[1].strip().startswith("python"):
                    uid = [int(x) for x in status.split("Uid:", 1)[1].split("\n", 1)[0].split()]
                    seen.setdefault(worker, set()).add(tuple(uid))
    assert len(seen) == 4, seen  # the shared worker and one instance per environment
    uids = [u for found in seen.values() for u in found]
    assert all(len(found) == 1 for found in seen.values()), seen  # one uid per sandbox, every process of it
    assert all(len(set(u)) == 1 and u[0] >= isolation.UID_BASE for u in uids), uids
    assert len(set(uids)) == 4, uids  # never shared: RLIMIT_NPROC and owner checks hold per sandbox
    # what an environment sees of itself: one constant
    assert all("'uid': 65534" in r["steps"][0]["raw_observation"] for r in results), results


@pytest.mark.skipif(os.geteuid() != 0, reason="the per-sandbox uids are for a pipeline running as root")
def test_no_process_of_a_sandbox_outlives_it():
    with Sandbox(workers=2, limits=Limits(call_timeout_s=10)) as box:
        list(box.run(_probes(3)))
        uids = {worker.uid.uid for worker in box._all}
        alive = sandbox_module.uid_processes(uids)
        assert len(uids) == 4 and len(alive) >= 8, alive  # worker, zygote, spare per sandbox, idle ones too
    assert sandbox_module.uid_processes(uids) == []  # counted from outside, by uid: none left


def test_the_documented_allowlist_is_the_compiled_one():
    from pipeline.execution import seccomp

    assert seccomp.table_markdown() in (PROJECT / "docs" / "environments.md").read_text()


def test_each_untrusted_environment_gets_an_instance_and_a_lost_init_runs_again_on_a_fresh_one(monkeypatch):
    from pipeline.execution import sandbox as sandbox_module

    other = IDENTITY.replace("class Where", "SECRET = 'another'\n\nclass Where")
    a = Trajectory("inst/a", "task", _spec("probe/a", IDENTITY, "Where"), (Action("where", {}, turn=0),))
    b = Trajectory("inst/b", "task", _spec("probe/b", other, "Where"), (Action("where", {}, turn=0),))
    real = sandbox_module._Worker.receive
    calls: list[str] = []

    def lost_once(self, trajectory, limits):
        calls.append(trajectory.trajectory_id)
        if trajectory.trajectory_id == "inst/b" and calls.count("inst/b") == 1:
            self.kill()  # as if the instance died before the reset's frame arrived
            raise sandbox_module._WorkerLost(
                {"trajectory_id": "inst/b", "init": None, "init_error": "WorkerCrash: gone", "steps": [], "issues": []}
            )
        return real(self, trajectory, limits)

    monkeypatch.setattr(sandbox_module._Worker, "receive", lost_once)
    with Sandbox(workers=1, limits=Limits(call_timeout_s=10)) as box:
        results = dict((t.trajectory_id, r) for t, r in box.run([a, b]))
        assert box.instances_started == 3  # a's, b's, and b's again
    assert calls == ["inst/a", "inst/b", "inst/b"]
    assert results["inst/b"]["init"] is not None and results["inst/b"]["init_error"] is None
    assert "another" not in json.dumps(results["inst/a"])
