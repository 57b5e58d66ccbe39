"""Every clock and entropy source named in issue 24 (and the file times, CPU-usage counters and host
identity of issue 33) is frozen in the sandbox child: an environment (EnvScaler
format) whose tool returns the value of that source gives byte-identical labels when its trajectory runs twice,
each time in a freshly forked child (as the determinism check re-executes), and in a reused child.

Sources the freeze cannot reach (an object's address) are the determinism check's job:
tests/labeling/test_determinism_check.py."""

from __future__ import annotations

import pytest

from pipeline.core.trajectory import Action, Trajectory
from pipeline.envs.envscaler import EnvItem

#: source -> the expression the tool returns (evaluated inside the sandbox child, at every call)
SOURCES = {
    "clock_gettime": "[time.clock_gettime(c) for c in (time.CLOCK_REALTIME, time.CLOCK_MONOTONIC, "
    "time.CLOCK_PROCESS_CPUTIME_ID, time.CLOCK_THREAD_CPUTIME_ID, time.CLOCK_BOOTTIME)]",
    "clock_gettime_ns": "[time.clock_gettime_ns(c) for c in (time.CLOCK_REALTIME, time.CLOCK_MONOTONIC, "
    "time.CLOCK_MONOTONIC_RAW)]",
    "process_time": "[time.process_time(), time.process_time_ns()]",
    "thread_time": "[time.thread_time(), time.thread_time_ns()]",
    "os_times": "list(os.times())",
    "proc_uptime": "[open('/proc/uptime').read(), io.open('/proc/uptime', 'rb').read().decode(), "
    "pathlib.Path('/proc/uptime').read_text()]",
    "monotonic": "[time.monotonic(), time.perf_counter(), time.monotonic_ns(), time.perf_counter_ns()]",
    "random_instance": "[random.Random().random(), random.Random(None).randint(0, 10**12)]",
    "random_seed_noarg": "(random.seed(), random.random())[1]",
    "random_instance_seed_noarg": "(lambda r: (r.seed(), r.random())[1])(random.Random(5))",
    "getrandom": "os.getrandom(16).hex()",
    "urandom": "os.urandom(16).hex()",
    "secrets": "[secrets.token_hex(8), secrets.randbelow(10**9), secrets.SystemRandom().random()]",
    "uuid": "[str(uuid.uuid4()), str(uuid.uuid1())]",
    "tempfile_names": "[next(tempfile._get_candidate_names()), os.path.basename(tempfile.mktemp()), _mkstemp_name()]",
    "time_time": "[time.time(), datetime.datetime.now().isoformat()]",
    # issue 33: file times of a file the environment wrote, CPU-usage counters
    "file_stat": "_file_times(lambda p: [list(os.stat(p)), os.stat(p).st_mtime_ns, os.lstat(p).st_ctime, _fstat(p)])",
    "file_getmtime": "_file_times(lambda p: [os.path.getmtime(p), os.path.getctime(p), os.path.getatime(p), "
    "str(datetime.date.fromtimestamp(os.path.getmtime(p)))])",
    "file_scandir": "_file_times(lambda p: [e.stat().st_mtime_ns for e in os.scandir('.') if e.name == p] + "
    "[e.stat(follow_symlinks=False).st_atime for e in os.scandir('.') if e.name == p])",
    "file_pathlib": "_file_times(lambda p: [pathlib.Path(p).stat().st_mtime, pathlib.Path(p).lstat().st_ctime_ns])",
    "getrusage": "(sum(range(300000)), [list(resource.getrusage(w)) for w in (resource.RUSAGE_SELF, "
    "resource.RUSAGE_CHILDREN, resource.RUSAGE_THREAD)])",
    "getloadavg": "list(os.getloadavg())",
}


def _code(expr: str) -> str:
    return f'''
import datetime, io, os, pathlib, platform, random, resource, secrets, socket, tempfile, time, uuid


def _file_times(read):
    """Write a file (its times are the host's real ones), read them, remove it."""
    path = "written.txt"
    with open(path, "w") as f:
        f.write("x")
    time.sleep(0.01)  # the real clock moves between executions anyway
    try:
        return read(path)
    finally:
        os.unlink(path)


def _fstat(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        return list(os.fstat(fd))
    finally:
        os.close(fd)


def _mkstemp_name():
    fd, path = tempfile.mkstemp(dir=".")
    os.close(fd)
    os.unlink(path)
    return os.path.basename(path)


class Source:
    """Reads one clock or entropy source."""

    def __init__(self, init_config):
        self.reads = []

    def read(self):
        """Read the source; the value goes into the state and the observation."""
        value = {expr}
        self.reads.append(value)
        return {{"success": True, "data": value}}
'''


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read",
            "description": "Read the source",
            "parameters": {"type": "object", "properties": {}},
        },
    }
]


def _trajectory(name: str, expr: str, index: int = 0) -> Trajectory:
    item = EnvItem(env_id=f"src_{name}", class_name="Source", class_code=_code(expr), tools=TOOLS)
    return Trajectory(
        f"envscaler/src_{name}/t{index}",
        f"t{index}",
        item.spec({}),
        tuple(Action("read", {}) for _ in range(3)),
        seed=3,
    )


LABELS = ("raw_observation", "state_after_hash", "outcome", "delta_size")


def _labels(result: dict) -> list[tuple]:
    assert result["init"] is not None, result["init_error"]
    return [tuple(str(s.get(f)) for f in LABELS) for s in result["steps"]]


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_source_is_frozen_identical_labels_in_fresh_and_reused_children(sandbox, name):
    trajectories = [_trajectory(name, SOURCES[name], i) for i in range(3)]
    first = [r for _, r in sandbox.run(trajectories, fresh_children=True)]
    second = [r for _, r in sandbox.run(trajectories, fresh_children=True)]
    reused = [r for _, r in sandbox.run(trajectories)]  # one child for the three (same environment code)
    for a, b, c in zip(first, second, reused):
        assert [s["outcome"] for s in a["steps"]] == ["success"] * 3, a["steps"][0]["raw_observation"]
        assert _labels(a) == _labels(b) == _labels(c), (
            name,
            a["steps"][0]["raw_observation"],
            b["steps"][0]["raw_observation"],
        )


def _read_raw(path: str) -> str:
    return f"(lambda fd: (os.read(fd, 4096).decode(), os.close(fd))[0])(os.open({path!r}, os.O_RDONLY))"


#: host-identity source -> the expression the tool returns (issue 33); identical on one machine, so the
#: test also asserts that none of this machine's own values reaches the labels
HOST_SOURCES = {
    "os_uname": "list(os.uname())",
    "platform": "[platform.uname().node, platform.uname().release, platform.node(), platform.release(), "
    "platform.version(), platform.platform()]",
    "hostname": "[socket.gethostname(), open('/proc/sys/kernel/hostname').read()]",
    "boot_id": "[open('/proc/sys/kernel/random/boot_id').read(), "
    "pathlib.Path('/proc/sys/kernel/random/boot_id').read_text(), "
    f"{_read_raw('/proc/sys/kernel/random/boot_id')}]",
    "kernel_release": "[open('/proc/sys/kernel/osrelease').read(), open('/proc/version').read(), "
    f"open('/proc/sys/kernel/version').read(), {_read_raw('/proc/version')}, "
    f"{_read_raw('/proc/sys/kernel/osrelease')}]",
}


def _host_values() -> list[str]:
    import os
    import socket

    values = [os.uname().release, os.uname().version, socket.gethostname()]
    with open("/proc/sys/kernel/random/boot_id") as f:
        values.append(f.read().strip())
    return values


@pytest.mark.parametrize("name", sorted(HOST_SOURCES))
def test_host_identity_is_constant(sandbox, name):
    item = EnvItem(env_id=f"host_{name}", class_name="Source", class_code=_code(HOST_SOURCES[name]), tools=TOOLS)
    trajectories = [
        Trajectory(
            f"envscaler/host_{name}/t{i}", f"t{i}", item.spec({}), tuple(Action("read", {}) for _ in range(2)), seed=3
        )
        for i in range(2)
    ]
    first = [r for _, r in sandbox.run(trajectories, fresh_children=True)]
    second = [r for _, r in sandbox.run(trajectories)]
    for a, b in zip(first, second):
        assert [s["outcome"] for s in a["steps"]] == ["success"] * 2, a["steps"][0]["raw_observation"]
        assert _labels(a) == _labels(b)
        observation = a["steps"][0]["raw_observation"]
        assert "envsim" in observation or "00000000-0000-4000" in observation, observation
        for value in _host_values():
            assert value not in observation, (value, observation)
