"""Ordinary Python the environment's own module relies on, and the hostile corpus of what the host may not show.

* the environment's module stays importable: a class with ``__slots__``, one that pickles (and deep-copies) its own
  classes for undo snapshots, one whose state is its ``__getstate__`` — each resets, steps without error and labels
  its state from its own attributes;
* the host's identity and day do not reach the labels (see the tests below for each family).

Each environment runs in the real sandbox (the session's ``sandbox`` fixture), in fresh children."""

from __future__ import annotations

import json

import pytest

from pipeline.core.trajectory import Action, Trajectory
from pipeline.envs.envscaler import EnvItem

TOOLS = [{"type": "function", "function": {"name": "act", "description": "Act.", "parameters": {"type": "object"}}}]

STATEFUL = {
    "slots": '''
class Env:
    __slots__ = ("count", "__secret", "items")

    def __init__(self, init_config):
        self.count = 0
        self.__secret = "s"
        self.items = []

    def act(self):
        """Count."""
        self.count += 1
        self.items.append(self.count)
        return {"success": True, "data": self.count}
''',
    "pickled_undo": '''
import copy
import pickle
from dataclasses import dataclass, field

@dataclass
class Item:
    name: str
    tags: list = field(default_factory=list)

class Env:
    def __init__(self, init_config):
        self.items = [Item("a")]
        self.undo = []

    def act(self):
        """Snapshot, change, then undo once every other call."""
        snapshot = pickle.dumps(self.items)
        self.items.append(copy.deepcopy(self.items[-1]))
        self.items[-1].tags.append(len(self.items))
        if len(self.items) % 2:
            self.items = pickle.loads(snapshot)
        return {"success": True, "data": [i.name for i in self.items]}
''',
    "getstate": '''
import threading

class Env:
    def __init__(self, init_config):
        self.lock = threading.Lock()
        self.total = 0

    def __getstate__(self):
        return {"total": self.total}

    def act(self):
        """Add."""
        with self.lock:
            self.total += 2
        return {"success": True, "data": self.total}
''',
}


def _trajectory(name: str, code: str, calls: int = 3, tool: str = "act") -> Trajectory:
    item = EnvItem(env_id=f"profile_{name}", class_name="Env", class_code=code, tools=TOOLS)
    actions = tuple(Action(tool, {}) for _ in range(calls))
    return Trajectory(f"envscaler/profile_{name}/t0", "t0", item.spec({}), actions, seed=3)


@pytest.mark.parametrize("name", sorted(STATEFUL))
def test_the_environments_module_stays_importable_and_its_state_is_its_own_attributes(sandbox, name):
    ((_, result),) = sandbox.run([_trajectory(name, STATEFUL[name])], fresh_children=True)
    assert result["init"] is not None, result["init_error"]
    steps = result["steps"]
    assert [s["outcome"] for s in steps] == ["success"] * 3, steps[0]["raw_observation"]
    final = json.loads(result["init"]["state_json"])
    assert final, "the initial state holds the instance's attributes"
    if name == "slots":
        assert sorted(final) == ["_Env__secret", "count", "items"]
        assert all(s["delta_size"] == 2 for s in steps)
    if name == "getstate":
        assert final == {"total": 0}


# -- Δ amplification: a state filled then emptied key by key ------------------------------------------------------

AMPLIFIER = '''
class Env:
    def __init__(self, init_config):
        self.table = {}

    def fill(self):
        """Fill the state with many small keys."""
        self.table = {f"k{i:06d}": i for i in range(30000)}
        return {"success": True}

    def empty(self):
        """Empty it again."""
        self.table = {}
        return {"success": True}

    def add_one(self):
        """One small change."""
        self.table["one"] = 1
        return {"success": True}
'''


def test_a_state_filled_then_emptied_is_stopped_at_the_delta_budget_with_its_size(sandbox):
    from pipeline.execution.labels import MAX_DELTA_RECORDS, OVER_BUDGET

    tools = [
        {"type": "function", "function": {"name": n, "description": n, "parameters": {"type": "object"}}}
        for n in ("fill", "empty", "add_one")
    ]
    item = EnvItem(env_id="profile_amplifier", class_name="Env", class_code=AMPLIFIER, tools=tools)
    actions = tuple(Action(n, {}) for n in ("add_one", "fill", "empty", "fill", "empty"))
    trajectory = Trajectory("envscaler/profile_amplifier/t0", "t0", item.spec({}), actions, seed=3)
    ((_, result),) = sandbox.run([trajectory], fresh_children=True)
    steps = result["steps"]
    assert [(s["tool"], s["outcome"]) for s in steps] == [("add_one", "success"), ("fill", "error")], steps
    stopped = steps[1]
    assert stopped["error_type"] == OVER_BUDGET and stopped["delta_size"] == 0, stopped
    assert f"more than {MAX_DELTA_RECORDS} Δ records" in stopped["error_message"], stopped["error_message"]
    assert any("trajectory stopped at step 1" in i for i in result["issues"]), result["issues"]


# -- the day: a clock below Python ------------------------------------------------------------------------------------

DAY = '''
import datetime, sqlite3, time

class Env:
    def __init__(self, init_config):
        self.seen = []

    def act(self):
        """Read the day where C code reads it, and wait five seconds for it."""
        start = time.time()
        while time.time() < start + 5:
            time.sleep(0.5)
        sql = sqlite3.connect(":memory:").execute("select datetime('now'), date('now')").fetchone()
        now = datetime.datetime.now()
        self.seen.append([list(sql), now.isoformat(), type(now) is datetime.datetime, time.time() - start >= 5])
        return {"success": True}
'''


def test_sqlite_datetime_and_a_wait_loop_see_the_frozen_clock(sandbox):
    from pipeline.execution import freeze

    if freeze.clock_library() is None:
        pytest.skip("no C compiler: the clock below Python cannot be built here (./forge setup installs one)")
    ((_, result),) = sandbox.run([_trajectory("day", DAY, calls=2)], fresh_children=True)
    assert [s["outcome"] for s in result["steps"]] == ["success"] * 2, result["steps"][0]["raw_observation"]
    assert all(s["call_seconds"] < 2 for s in result["steps"]), "the wait loop waited for real"
    delta = result["steps"][-1]["delta"][0]
    seen = json.loads(delta["after"])
    for (sql_datetime, sql_date), iso, real_class, waited in seen:  # the frozen clock: 2025 (core.clock), not today
        assert sql_date == iso[:10] and iso.startswith("2025-") and sql_datetime.replace(" ", "T") == iso[:19], seen
        assert real_class and waited, seen
    assert seen[0][1] != seen[1][1], "each step has a time of its own"


# -- host identity: what the machine is -------------------------------------------------------------------------------

IDENTITY = '''
import ctypes, multiprocessing, os, resource, sys

class Utsname(ctypes.Structure):
    _fields_ = [(n, ctypes.c_char * 65) for n in ("sysname", "nodename", "release", "version", "machine", "domain")]

class Env:
    def __init__(self, init_config):
        self.seen = {}

    def act(self):
        """Read what the machine is, in Python and through libc."""
        libc = ctypes.CDLL(None)
        uts = Utsname()
        libc.uname(ctypes.byref(uts))
        self.seen = {
            "cpus": [os.cpu_count(), multiprocessing.cpu_count(), sorted(os.sched_getaffinity(0)),
                     os.sysconf("SC_NPROCESSORS_ONLN"), libc.get_nprocs(), libc.sysconf(84)],
            "memory": os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"),
            "limits": [resource.getrlimit(r) for r in (resource.RLIMIT_STACK, resource.RLIMIT_MEMLOCK,
                                                         resource.RLIMIT_SIGPENDING, resource.RLIMIT_NOFILE)],
            "code_paths": sorted({m.__spec__.origin for m in list(sys.modules.values())
                                  if getattr(m, "__spec__", None) and (m.__spec__.origin or "").endswith(".py")
                                  and m.__name__.startswith("pipeline")})[:3],
            "pyc_paths": [compile_path(p) for p in ("pipeline/core/canonical.py", "pipeline/execution/child.py")],
            "prefix": [sys.prefix, sys.base_prefix, sys.executable],
            "release": uts.release.decode(),
        }
        return {"success": True}

def compile_path(relative):
    """co_filename of the package's compiled file as stored on disk (not as the import machinery fixes it)."""
    import importlib.util, marshal
    for top in sys.path:
        source = os.path.join(top, relative)
        if os.path.isfile(source):
            try:
                with open(importlib.util.cache_from_source(source), "rb") as fh:
                    return marshal.loads(fh.read()[16:]).co_filename
            except OSError as exc:
                return type(exc).__name__
    return None
'''


def test_the_machine_the_environment_sees_is_a_constant(sandbox):
    from pathlib import Path

    from pipeline.execution import freeze

    ((_, result),) = sandbox.run([_trajectory("identity", IDENTITY, calls=1)], fresh_children=True)
    assert result["steps"] and result["steps"][0]["outcome"] == "success", result["steps"][:1] or result["init_error"]
    seen = {r["path"][-1]: json.loads(r["after"]) for r in result["steps"][0]["delta"]}
    n = freeze.HOST_CPUS
    python_side = seen["cpus"][:4]
    assert python_side == [n, n, list(range(n)), n], seen["cpus"]
    if freeze.clock_library() is not None:
        assert seen["cpus"][4:] == [n, n], seen["cpus"]
    assert seen["memory"] == freeze.HOST_MEMORY_MB << 20
    stack, memlock, sigpending, _ = seen["limits"]
    assert stack == [8 << 20] * 2 and memlock == [64 << 10] * 2 and sigpending == [1024] * 2, seen["limits"]
    checkout = str(Path(__file__).resolve().parents[2])
    text = json.dumps(seen)
    assert checkout not in text and "/work/" not in text, text
    assert all(p in (None, "FileNotFoundError") or p.startswith("/opt/envsim/") for p in seen["pyc_paths"]), seen
    if freeze.clock_library() is not None:
        assert seen["release"] == freeze.HOST_RELEASE, seen["release"]


# -- the machine past what is pinned: caught by the determinism check's varied profile --------------------------------

RAW_AFFINITY = '''
import ctypes, os

class Env:
    def __init__(self, init_config):
        self.cpus = None
        self.pinned = None

    def act(self):
        """Read the CPU set with a raw system call (past libc), and as Python says it."""
        mask = ctypes.create_string_buffer(128)
        size = ctypes.CDLL(None, use_errno=True).syscall(204, 0, 128, mask)  # SYS_sched_getaffinity (x86_64)
        self.cpus = mask.raw[:max(size, 0)].hex()
        self.pinned = sorted(os.sched_getaffinity(0))
        return {"success": True}
'''


def test_the_varied_profile_changes_what_reads_the_machine_raw_and_nothing_else(sandbox):
    import os
    import platform

    from pipeline.execution import freeze
    from pipeline.labeling.determinism import varied

    if platform.machine() != "x86_64" or len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs x86_64 (the raw syscall number) and two CPUs to vary the affinity")
    raw = _trajectory("raw_affinity", RAW_AFFINITY, calls=1)
    calm = _trajectory("identity", IDENTITY, calls=1)
    assert varied(raw).meta[freeze.HOST_PROFILE] == freeze.VARIED
    first = {t.trajectory_id: r for t, r in sandbox.run([raw, calm], fresh_children=True)}
    again = {t.trajectory_id: r for t, r in sandbox.run([varied(raw), varied(calm)], fresh_children=True)}
    (raw_a, calm_a), (raw_b, calm_b) = ([runs[t.trajectory_id] for t in (raw, calm)] for runs in (first, again))
    assert raw_a["steps"][0]["outcome"] == "success", raw_a["steps"][0]["raw_observation"]
    assert raw_a["steps"][0]["state_after_hash"] != raw_b["steps"][0]["state_after_hash"], "raw affinity not varied"
    assert calm_a["steps"][0]["state_after_hash"] == calm_b["steps"][0]["state_after_hash"], "pinned values varied"


# -- terminal injection: kept verbatim in the data (the console escapes it: tests/assets/test_console_logger.py) ------

INJECTION = "\x1b]0;pwned\x07\x1b[2J\r\nenvsim_main: all checks passed"

INJECTOR = f'''
class Env:
    def __init__(self, init_config):
        if init_config.get("fail"):
            raise RuntimeError({INJECTION!r})
        self.n = 0

    def act(self):
        """Print and answer terminal control sequences."""
        print({INJECTION!r})
        self.n += 1
        return {{"success": True, "data": {INJECTION!r}}}
'''


def test_terminal_control_sequences_from_inside_are_kept_verbatim_in_the_data(sandbox):
    item = EnvItem(env_id="profile_injector", class_name="Env", class_code=INJECTOR, tools=TOOLS)
    failing = Trajectory("envscaler/profile_injector/t1", "t1", item.spec({"fail": True}), (), seed=3)
    (_, reset), (_, ran) = sorted(
        sandbox.run([failing, _trajectory("injector", INJECTOR, calls=1)], fresh_children=True),
        key=lambda pair: pair[0].trajectory_id,
        reverse=True,
    )
    assert reset["init"] is None and INJECTION in reset["init_error"], reset["init_error"]
    step = ran["steps"][0]
    assert INJECTION in step["env_output"] and repr(INJECTION)[1:-1] in step["raw_observation"], step  # str(dict)
