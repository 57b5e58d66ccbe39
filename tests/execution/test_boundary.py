"""The boundary between environments (issue 24, items 1–3): a sandbox child cannot reach its worker
or its siblings, writes only into its own fresh directory (enforced by the kernel: Landlock), and a
reused child is as clean as a fresh fork — or is not reused. A poisoned trajectory cannot change the
next one's labels."""

from __future__ import annotations

import ctypes
import errno
import json
import logging
import os
import signal
import subprocess
import sys
import time

import pytest

from pipeline.core.environment import EnvSpec
from pipeline.core.trajectory import Action, Trajectory
from pipeline.envs import envscaler, registry
from pipeline.execution import isolation, landlock, seccomp, worker
from pipeline.execution import isolation as isolation_module
from pipeline.execution import sandbox as sandbox_module
from pipeline.execution.child import Limits
from pipeline.execution.frames import FdReader, decode, encode
from pipeline.execution.sandbox import Sandbox
from tests.support.procs import descendants

MARK_PREFIX, MARK_SUFFIX = "QZX-other-env-", "secret-code-7731"

PROBE_CODE = r'''
import errno, gc, os, resource, signal, sys, threading, time

def _kernel_write(directory, name, data=b"x", append=False):
    """A write the audit hook does not see as outside: a dir_fd-relative name."""
    dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC)
        fd = os.open(name, flags, 0o644, dir_fd=dfd)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
    finally:
        os.close(dfd)

class Probe:
    def __init__(self, init_config=None):
        self.n = 0

    def reach(self):
        """Opens every other process's /proc mem, environ and fds it can."""
        opened = []
        try:
            pids = os.listdir("/proc")
        except OSError:  # Landlock: /proc is not readable at all; try the pids there are
            pids = [str(p) for p in range(1, 64)]
        for p in pids:
            if not p.isdigit() or int(p) == os.getpid():
                continue
            for what in ["mem", "environ"] + [f"fd/{i}" for i in range(0, 12)]:
                try:
                    fd = os.open(f"/proc/{p}/{what}", os.O_RDONLY)
                except OSError:
                    continue
                os.close(fd)
                opened.append(f"{p}/{what}")
        return {"opened": sorted(opened)}

    def worker_status(self):
        with open(f"/proc/{os.getppid()}/status") as fh:
            lines = [l.split(":", 1) for l in fh.read().splitlines()]
        return {k: v.strip() for k, v in lines if k in ("Seccomp", "NoNewPrivs", "Seccomp_filters")}

    def hit_others(self):
        """pidfd_open / prlimit on the worker, memfd_create; a signal to itself still works."""
        out = {}
        target = os.getppid()
        for name, call in (("pidfd_open", lambda: os.close(os.pidfd_open(target))),
                           ("prlimit", lambda: resource.prlimit(target, resource.RLIMIT_FSIZE, (1, 1))),
                           ("memfd_create", lambda: os.close(os.memfd_create("x")))):
            try:
                call()
                out[name] = "allowed"
            except OSError as exc:
                out[name] = errno.errorcode.get(exc.errno, str(exc.errno))
        got = []
        signal.signal(signal.SIGUSR1, lambda *a: got.append(1))
        signal.raise_signal(signal.SIGUSR1)  # tgkill on itself
        out["raise_self"] = "ok" if got else "lost"
        out["prlimit_self"] = str(resource.prlimit(0, resource.RLIMIT_NOFILE)[0] > 0)
        return out

    def plant(self):
        """Plants /tmp/statistics.py (the worker's /tmp) through a dir_fd-relative name."""
        _kernel_write("/tmp", "statistics.py", b"import os\nPWNED = True\n")
        return {"planted": True}

    def write_around(self):
        """Tries to create a file, through dir_fd, in every directory beside its own and on sys.path."""
        mine = os.path.realpath(os.getcwd())
        own = os.path.dirname(mine)  # the child's own root: its trajectory directories live there
        targets = {"/tmp", "/dev", "/dev/shm", "/tmp/work"}
        try:
            listed = os.listdir("/tmp") + ["work/" + x for x in os.listdir("/tmp/work")]
        except OSError:  # Landlock: only its own directory of /tmp is readable
            listed = ["work"]
        for d in listed:
            path = os.path.join("/tmp", d)
            if os.path.isdir(path) and os.path.realpath(path) != own:
                targets.add(path)
                try:
                    targets |= {os.path.join(path, x) for x in os.listdir(path) if os.path.isdir(os.path.join(path, x))}
                except OSError:
                    pass
        targets |= {p for p in sys.path if p and os.path.isdir(p)}
        written = []
        for d in sorted(targets):
            try:
                _kernel_write(d, "envsim-boundary-probe", b"x", append=True)
                written.append(d)
            except OSError:
                pass
        return {"written": written, "sys_path_has_cwd": "" in sys.path or os.getcwd() in sys.path}

    def write_to(self, directory):
        _kernel_write(directory, "envsim-boundary-probe.txt", b"x")
        return {"success": True}

    def shm(self):
        try:
            st = os.statvfs("/dev/shm")
        except PermissionError:
            return {"shm_bytes": None, "statfs": "refused"}
        return {"shm_bytes": st.f_blocks * st.f_frsize}

    def fill(self):
        """Fills its temp (inside: ENOSPC for itself) and tries the worker's /tmp (refused)."""
        outside = "refused"
        try:
            _kernel_write("/tmp", "filler-outside", b"x" * (1 << 20))
            outside = "written"
        except OSError:
            pass
        n = 0
        try:
            while n < 64:
                with open(f"fill-{n}", "wb") as fh:
                    for _ in range(8):
                        fh.write(b"\0" * (1 << 20))
                n += 1
        except OSError as exc:
            return {"outside": outside, "inside": errno.errorcode.get(exc.errno, "?"), "files": n}
        return {"outside": outside, "inside": "not full", "files": n}

    def scratch(self):
        """A victim's reset-like work: writes 2 MiB to its own temp and reads it back."""
        import tempfile
        with tempfile.NamedTemporaryFile() as fh:
            fh.write(b"y" * (2 << 20))
            fh.flush()
            size = os.path.getsize(fh.name)
        return {"size": size, "statistics": __import__("statistics").__file__,
                "planted_exists": os.path.exists("/tmp/statistics.py")}

    def where(self):
        import tempfile
        return {"cwd": os.getcwd(), "tmpdir": os.environ.get("TMPDIR"), "home": os.environ.get("HOME"),
                "gettempdir": tempfile.gettempdir(), "files": sorted(os.listdir(".")), "pid": os.getpid()}

    def leave_file(self):
        with open("left-behind.txt", "w") as fh:
            fh.write("x")
        return {"success": True}

    def find(self, prefix, suffix):
        """Looks for another environment's code text: the blobs module and every object gc knows."""
        def hit(text):
            i = text.find(prefix)
            return i >= 0 and text.startswith(suffix, i + len(prefix))
        blobs = sys.modules["pipeline.envs.blobs"]
        found = [r for r, t in blobs._BLOBS.items() if hit(t)]
        found += [r for r, c in blobs._COMPILED.items() if any(isinstance(k, str) and hit(k) for k in c.co_consts)]
        for obj in gc.get_objects():
            values = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, (list, tuple)) else ()
            try:
                for v in values:
                    if isinstance(v, str) and hit(v):
                        found.append(type(obj).__name__)
                        break
            except Exception:
                pass
            if type(obj).__name__ == "code" and any(isinstance(k, str) and hit(k) for k in obj.co_consts):
                found.append("code")
        return {"found": found, "blobs": len(blobs._BLOBS)}
'''

OTHER_CODE = PROBE_CODE.replace("class Probe:", f"SECRET = '{MARK_PREFIX}{MARK_SUFFIX}'\n\nclass Probe:")

POISON_CODE = r'''
import os, random, threading, time, uuid

class Ledger:
    def __init__(self, init_config=None):
        self.ids = []
        cfg = init_config or {}
        if cfg.get("poison") == "uuid":
            uuid.uuid4 = lambda: uuid.UUID(int=0)
        elif cfg.get("poison") == "random":
            random.randint = lambda a, b: a
        elif cfg.get("poison") == "thread":
            self._start_thread()

    def _start_thread(self):
        def forever():
            while True:  # keeps patching, writing and burning CPU, with or without a call in flight
                uuid.uuid4 = lambda: uuid.UUID(int=1)
                random.randint = lambda a, b: b
                try:
                    with open("thread-was-here", "a") as fh:
                        fh.write("x")
                except OSError:
                    pass
                deadline = time.perf_counter() + 0.002
                while time.perf_counter() < deadline:
                    pass
        threading.Thread(target=forever, daemon=True).start()

    def poison(self, how: str):
        """Patches the module (call-time poisoning)."""
        if how == "uuid":
            uuid.uuid4 = lambda: uuid.UUID(int=2)
        elif how == "random":
            random.randint = lambda a, b: a
        else:
            self._start_thread()
        return {"success": True}

    def new_id(self):
        """An id and a number (what an innocent environment does)."""
        entry = {"id": str(uuid.uuid4()), "n": random.randint(1, 10**9)}
        self.ids.append(entry)
        return {"success": True, "data": entry}
'''


def _spec(env_id: str, code: str = PROBE_CODE, cls: str = "Probe", config: dict | None = None):
    item = envscaler.parse_env_item(env_id, {"env_class_name": cls, "env_class_code": code})
    assert not item.problems, item.problems
    return item.spec(config or {})


def _traj(spec, *actions, tid="t"):
    acts = tuple(Action(n, dict(a), turn=i) for i, (n, a) in enumerate(actions))
    return Trajectory(tid, "task", spec, acts)


def _obs(result: dict) -> list:
    assert result["init"] is not None, result["init_error"]
    return [s["raw_observation"] for s in result["steps"]]


def _value(result: dict, index: int = 0):
    import ast

    obs = _obs(result)[index]
    return ast.literal_eval(obs)


@pytest.fixture(scope="module")
def box():
    with Sandbox(workers=1, limits=Limits(call_timeout_s=5, memory_mb=512, tmp_mb=48, reuse_children=8)) as sandbox:
        yield sandbox


def run(box, *trajectories):
    return [r for _, r in box.run(list(trajectories))]


# -- item 1: children cannot reach the worker or each other -----------------------------------------


def test_a_child_cannot_open_the_worker_or_a_siblings_memory_fds_or_environ(box):
    other = _traj(_spec("other-env", OTHER_CODE), ("where", {}), tid="warm-sibling")
    probe = _traj(_spec("probe"), ("reach", {}), tid="prober")
    _, result = run(box, other, probe)  # the other env's child stays warm (a sibling) while the probe runs
    assert _value(result) == {"opened": []}


def test_the_worker_runs_non_dumpable_under_its_own_seccomp_filter(box):
    """Read from outside (a child cannot read /proc): every Python process of the sandbox runs under a filter
    with no_new_privs."""
    [result] = run(box, _traj(_spec("probe"), ("where", {})))
    assert result["init"] is not None
    statuses = []
    for sandbox_worker in box._all:
        for pid in descendants(sandbox_worker.proc.pid):
            try:
                text = open(f"/proc/{pid}/status").read()
            except OSError:
                continue
            fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
            if fields["Name"].strip().startswith("python"):
                statuses.append((fields["Seccomp"].strip(), fields["NoNewPrivs"].strip()))
    assert statuses and set(statuses) == {("2", "1")}, statuses


def test_the_base_filter_refuses_exec_even_to_a_child_without_its_own_filter():
    """A child whose prepared filter was overwritten (never installed) still cannot run a program."""
    pid = os.fork()
    if pid == 0:
        code = 3
        try:
            seccomp.install_base()
            grandchild = os.fork()  # allowed by the base filter (the worker forks)
            if grandchild == 0:
                try:
                    os.execv("/bin/true", ["/bin/true"])
                except OSError as exc:
                    os._exit(0 if seccomp.refused_syscall(str(exc)) == "execve" else 4)
                os._exit(5)
            _, status = os.waitpid(grandchild, 0)
            code = os.waitstatus_to_exitcode(status)
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def _syscall_results_under_child_filter(other: int) -> dict[str, int]:
    """In a forked process under the child filter: errno (0: allowed) of each syscall at ``other``."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            libc = ctypes.CDLL(None, use_errno=True)
            libc.syscall.restype = ctypes.c_long
            seccomp.install()
            import pyseccomp

            nr = {
                name: pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, name)
                for name in (
                    "tgkill",
                    "tkill",
                    "rt_sigqueueinfo",
                    "rt_tgsigqueueinfo",
                    "prlimit64",
                    "pidfd_open",
                    "pidfd_send_signal",
                    "memfd_create",
                    "kill",
                    "fcntl",
                )
            }
            me = os.getpid()
            buf = (ctypes.c_int * 32)()
            buf[2] = -1  # si_code SI_QUEUE: what the kernel lets a process queue to another

            def call(name, *args):
                ctypes.set_errno(0)
                res = libc.syscall(
                    ctypes.c_long(nr[name]), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args]
                )
                return 0 if res >= 0 else ctypes.get_errno()

            out = {
                "tgkill_other": call("tgkill", other, other, 0),
                "tkill_other": call("tkill", other, 0),
                "tgkill_self": call("tgkill", me, me, 0),
                "rt_sigqueueinfo_other": call("rt_sigqueueinfo", other, 0, ctypes.byref(buf)),
                "rt_tgsigqueueinfo_other": call("rt_tgsigqueueinfo", other, other, 0, ctypes.byref(buf)),
                "prlimit_other": call("prlimit64", other, 4, 0, ctypes.byref(buf)),
                "prlimit_self": call("prlimit64", 0, 4, 0, ctypes.byref(buf)),
                "pidfd_open_other": call("pidfd_open", other, 0),
                "pidfd_send_signal": call("pidfd_send_signal", 0, 0, 0, 0),
                "memfd_create": call("memfd_create", ctypes.c_char_p(b"x"), 0),
                "kill_other": call("kill", other, 0),
                "fcntl_setown": call("fcntl", 0, 8, other),
            }
            os.write(w, json.dumps(out).encode())
        finally:
            os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 4096):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return json.loads(data)


def test_the_child_filter_refuses_signals_limits_pidfds_and_memfds_aimed_at_other_processes():
    results = _syscall_results_under_child_filter(os.getpid())
    allowed_on_self = {"tgkill_self": 0, "prlimit_self": 0}
    assert {k: results[k] for k in allowed_on_self} == allowed_on_self
    refused = {k: v for k, v in results.items() if k not in allowed_on_self}
    conditional = ("tgkill_other", "tkill_other", "prlimit_other", "fcntl_setown")  # their arguments: EPERM
    assert {k: refused.pop(k) for k in conditional} == {k: errno.EPERM for k in conditional}
    named = {k: seccomp.refused_syscall(f"[Errno {v}]") for k, v in refused.items()}  # unlisted: named by errno
    assert named == {
        "rt_sigqueueinfo_other": "rt_sigqueueinfo",
        "rt_tgsigqueueinfo_other": "rt_tgsigqueueinfo",
        "pidfd_open_other": "pidfd_open",
        "pidfd_send_signal": "pidfd_send_signal",
        "memfd_create": "memfd_create",
        "kill_other": "kill",
    }, refused


def _refused(name: str) -> str:
    """The errno (as text) the child filter refuses ``name`` with on this machine."""
    import pyseccomp

    return str(seccomp.REFUSED_ERRNO + pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, name))


def test_in_the_sandbox_pidfd_prlimit_and_memfd_on_others_are_refused_and_signals_to_itself_work(box):
    [result] = run(box, _traj(_spec("probe"), ("hit_others", {})))
    assert _value(result) == {
        "pidfd_open": _refused("pidfd_open"),  # refused, naming itself
        "prlimit": "EPERM",  # prlimit64 on another pid: outside its condition
        "memfd_create": _refused("memfd_create"),
        "raise_self": "ok",
        "prlimit_self": "True",
    }


class _Pipe:
    """The parent side of a worker whose frames are written by the test."""

    def __init__(self) -> None:
        self.r, self.w = os.pipe()
        self.killed = False

    def worker(self) -> sandbox_module._Worker:
        w = sandbox_module._Worker.__new__(sandbox_module._Worker)
        w.reader = FdReader(self.r)
        pipe = self

        def kill() -> None:
            pipe.killed = True

        w.kill = kill  # type: ignore[method-assign]
        return w


def test_the_parent_refuses_a_frame_not_tagged_with_the_trajectory_it_reads():
    spec = _spec("probe")
    traj = _traj(spec, ("where", {}), tid="victim")
    pipe = _Pipe()
    for msg in (
        {"kind": "init", "state": "{}", "trajectory_id": "victim"},
        {
            "kind": "step",
            "step_index": 0,
            "tool": "where",
            "arguments": {},
            "raised": False,
            "observation": "{}",
            "value": "{}",
            "state": None,
            "trajectory_id": "attacker",
        },
        {"kind": "end", "trajectory_id": "victim"},
    ):
        os.write(pipe.w, encode(msg))
    with pytest.raises(sandbox_module._WorkerLost) as lost:
        pipe.worker().receive(traj, Limits())
    assert pipe.killed
    [step] = lost.value.result["steps"]
    assert step["outcome"] == "error" and "not tagged with this trajectory" in step["raw_observation"]


def test_the_worker_tags_every_forwarded_frame_and_its_tag_wins():
    forward = worker._tagger("mine")
    r, w = os.pipe()
    forged = encode({"kind": "step", "trajectory_id": "forged", "state": '{"a": 1}', "step_index": 0})
    plain = encode({"kind": "tick", "step_index": 0})
    forward(w, forged)
    forward(w, plain)
    os.close(w)
    reader = FdReader(r)
    reader.feed()
    reader.feed()
    first, second = reader.frames()
    assert first["trajectory_id"] == "mine" and first["state"] == '{"a": 1}'
    assert second == {"kind": "tick", "step_index": 0, "trajectory_id": "mine"}
    assert decode(encode(first)[4:]) == first


def test_another_environments_code_is_not_in_the_child(box):
    other = _traj(_spec("other-env", OTHER_CODE), ("where", {}), tid="other")
    probe = _traj(_spec("probe"), ("find", {"prefix": MARK_PREFIX, "suffix": MARK_SUFFIX}), tid="finder")
    _, result = run(box, other, probe)
    found = _value(result)
    assert found["found"] == [] and found["blobs"] == 2, found  # its own code and tool schemas only


def test_the_workers_stderr_is_a_capped_pipe_not_a_host_file(box, monkeypatch):
    w = box._all[0]
    assert os.readlink(f"/proc/{w.proc.pid}/fd/2").startswith("pipe:")
    script = "import sys; sys.stderr.write('x' * 500000 + 'LAST-WORDS'); sys.stderr.flush(); sys.exit(2)"
    monkeypatch.setattr(
        sandbox_module,
        "worker_command",
        lambda isolation, tmp_mb, preload=None: isolation_module.Launch([sys.executable, "-c", script], {}, "/"),
    )
    with pytest.raises(sandbox_module.SandboxUnavailable, match="LAST-WORDS"):
        sandbox_module._Worker("trusted", Limits())
    assert sandbox_module.STDERR_KEEP <= 64 << 10


# -- item 2: writes confined by the kernel ----------------------------------------------------------


def test_a_dir_fd_write_outside_its_directory_is_refused_by_the_kernel_and_plants_nothing(box):
    hostile = _traj(_spec("planter"), ("plant", {}), tid="planter")
    victim = _traj(_spec("probe"), ("scratch", {}), tid="victim")
    planted, after = run(box, hostile, victim)
    [step] = planted["steps"]
    assert step["outcome"] == "error" and "PermissionError" in step["raw_observation"], step["raw_observation"]
    seen = _value(after)
    assert seen["planted_exists"] is False and seen["statistics"].startswith(("/usr", isolation.PYTHON_DIR)), seen


def test_nothing_outside_its_own_directory_is_writable_and_sys_path_holds_nothing_writable(box):
    # a warm sibling first, so another child's directory exists beside the probe's
    sibling = _traj(_spec("other-env", OTHER_CODE), ("leave_file", {}), tid="sibling")
    probe = _traj(_spec("probe"), ("write_around", {}), tid="writer")
    _, result = run(box, sibling, probe)
    assert _value(result) == {"written": [], "sys_path_has_cwd": False}


def test_dev_shm_is_small_and_memfd_is_refused(box):
    """/dev/shm is a size-capped tmpfs of the instance's own (bwrap's command line) that Landlock does not let a
    child write; statfs shows its size."""
    [result] = run(box, _traj(_spec("probe"), ("shm", {})))
    assert _value(result) == {"shm_bytes": isolation.SHM_MB << 20}
    assert isolation.SHM_MB <= 8


def test_a_child_that_fills_its_temp_hurts_only_itself(box):
    filler = _traj(_spec("filler"), ("fill", {}), tid="filler")
    victim = _traj(_spec("probe"), ("scratch", {}), tid="victim-after-fill")
    filled, after = run(box, filler, victim)
    result = _value(filled)
    assert result["outside"] == "refused" and result["inside"] in ("ENOSPC", "EFBIG"), result
    assert _value(after)["size"] == 2 << 20


def test_each_trajectory_gets_a_fresh_directory_as_cwd_tmpdir_and_home(box):
    spec = _spec("probe", config={"fixed": 1})
    first = _traj(spec, ("where", {}), ("leave_file", {}), ("where", {}), tid="first")
    second = _traj(spec, ("where", {}), tid="second")
    one, two = run(box, first, second)
    a, b = _value(one), _value(two)
    assert a["pid"] != b["pid"], "corpus code: a child per trajectory, even of the same environment and configuration"
    assert a["cwd"] == a["tmpdir"] == a["home"] == a["gettempdir"] and a["files"] == []
    assert b["cwd"] == b["tmpdir"] == b["home"] == b["gettempdir"] and b["files"] == []
    assert a["cwd"] != b["cwd"] and _value(one, 2)["files"] == ["left-behind.txt"]


def test_trusted_isolation_applies_landlock_too(tmp_path):
    with Sandbox(workers=1, isolation="trusted", limits=Limits(call_timeout_s=5, reuse_children=1)) as trusted:
        assert trusted.landlock is True
        [result] = [r for _, r in trusted.run([_traj(_spec("probe"), ("write_to", {"directory": str(tmp_path)}))])]
    [step] = result["steps"]
    assert step["outcome"] == "error" and "PermissionError" in step["raw_observation"]
    assert list(tmp_path.iterdir()) == []


def test_without_landlock_the_sandbox_runs_and_says_so_loudly(monkeypatch, caplog):
    real = sandbox_module._Worker

    class NoLandlock(real):  # type: ignore[misc, valid-type]
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.landlock = 0

    monkeypatch.setattr(sandbox_module, "_Worker", NoLandlock)
    caplog.set_level(logging.WARNING, logger="pipeline.execution.sandbox")
    with Sandbox(workers=1, limits=Limits(call_timeout_s=5)) as box:
        assert box.landlock is False and "no Landlock" in box.confinement
        [result] = [r for _, r in box.run([_traj(_spec("probe"), ("where", {}))])]
        assert result["init"] is not None
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "Landlock" in r.getMessage()]
    assert len(warnings) == 1 and "\n" not in warnings[0].getMessage()
    monkeypatch.setitem(landlock._STATE, "abi", 0)
    assert landlock.restrict("/nonexistent") is False


# -- item 3: reuse that is provably clean, or none --------------------------------------------------


def test_corpus_code_has_no_reuse_key_and_the_builtin_packs_code_one_per_environment():
    """Issue 33: a corpus's environment never shares a child (whatever its configuration); the builtin
    pack's code (ours) shares one across configurations of one environment."""
    from pipeline.envs import builtin

    base = _spec("ledger", POISON_CODE, "Ledger")
    keys = {
        registry.reuse_key(_traj(spec, ("new_id", {})).env)
        for spec in (
            base,
            _spec("ledger", POISON_CODE, "Ledger", {"poison": "uuid"}),
            _spec("ledger-2", POISON_CODE, "Ledger"),
            EnvSpec(base.source, base.env_id, base.init_config, {**base.options, "extra": 1}),
        )
    }
    assert keys == {None}
    item = next(iter(builtin.parsed_items()))
    own = {registry.reuse_key(_traj(item.spec(config), ("x", {})).env) for config in ({}, {"a": 1})}
    assert len(own) == 1 and None not in own


def _descendants(pid: int) -> list[tuple[int, str]]:
    """(pid, state) of every descendant of ``pid``."""
    children: dict[int, list[int]] = {}
    states: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as fh:
                    fields = fh.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            states[int(entry)] = fields[0].decode()
            children.setdefault(int(fields[1]), []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append((child, states[child]))
            todo.append(child)
    return out


def test_with_no_trajectory_in_flight_no_child_runs(box):
    """With no trajectory in flight no child runs: a warm child (the builtin pack's code, reused) and a spare
    prepared for corpus code (it has run no environment code) sleep in the read of their next request, and
    so does the zygote that forks spares."""
    from pipeline.envs import builtin

    item = builtin.parsed_items()[0]
    own = [_traj(item.spec({}), (item.tool_names[0], {}), tid=f"own-{i}") for i in range(2)]
    run(box, *own, _traj(_spec("idle-probe"), ("where", {}), tid="idle"))
    deadline = time.monotonic() + 2  # the worker does not wait for an exit
    while True:
        # past bwrap's init and the worker: the shared worker's zygote and warm child, the corpus instance's
        # zygote and spare
        states = [state for w in box._all for _, state in _descendants(w.proc.pid)[2:]]
        live = [s for s in states if s not in ("Z", "X")]  # (a finished child not reaped yet is a zombie)
        if set(live) == {"S"} or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert set(live) == {"S"} and len(live) >= 4, states


def _ids(result: dict) -> list:
    return [(s["raw_observation"], s["state_after_hash"], s["outcome"], s["delta_size"]) for s in result["steps"]]


@pytest.mark.parametrize("how", ["uuid", "random", "thread"])
def test_a_poisoned_trajectory_cannot_change_the_next_ones_labels(how):
    """A scenario config (or a call) that patches uuid/random or leaves a thread behind: the victim's
    labels after it, with reuse, equal the victim's labels alone, byte for byte."""
    victim_spec = _spec("ledger", POISON_CODE, "Ledger", {"owner": "victim"})
    victim = _traj(victim_spec, ("new_id", {}), ("new_id", {}), ("new_id", {}), tid="victim")
    poisoned_config = _traj(
        _spec("ledger", POISON_CODE, "Ledger", {"poison": how}), ("new_id", {}), tid="poison-config"
    )
    # the same environment and configuration as the victim: a call poisons the child
    poisoned_call = _traj(victim_spec, ("poison", {"how": how}), ("new_id", {}), tid="poison-call")
    limits = Limits(call_timeout_s=5, reuse_children=8)
    with Sandbox(workers=1, limits=limits) as box:
        [alone] = [r for _, r in box.run([victim])]
    with Sandbox(workers=1, limits=limits) as box:
        results = [r for _, r in box.run([poisoned_config, victim, poisoned_call, victim])]
        if how == "thread":
            time.sleep(0.5)
            # exited, or asleep in its read with one thread (a warm child, a spare)
            running = [
                (p, s)
                for w in box._all
                for p, s in _descendants(w.proc.pid)[2:]
                if s not in ("T", "Z") and (s != "S" or len(os.listdir(f"/proc/{p}/task")) != 1)
            ]
            assert running == [], "no child runs code while no trajectory is in flight"
    assert _ids(alone) and all(s["outcome"] == "success" for s in alone["steps"])
    assert _ids(results[1]) == _ids(alone)
    assert _ids(results[3]) == _ids(alone)
