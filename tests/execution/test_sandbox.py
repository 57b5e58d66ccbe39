"""Untrusted environment code is contained: each misbehaviour is one labelled error step."""

import os

import pytest

from pipeline.core.trajectory import Action, Trajectory
from pipeline.envs import envscaler
from pipeline.envs.bfcl_replay import bfcl_env_spec
from pipeline.envs.bfcl_tasks import BfclTask
from pipeline.execution.child import Limits
from pipeline.execution.sandbox import Sandbox
from tests.support.envscaler_corpus import HOSTILE_CODE


@pytest.fixture(scope="module")
def box():
    with Sandbox(workers=2, limits=Limits(call_timeout_s=3, memory_mb=256, max_output_chars=2000)) as sandbox:
        yield sandbox


@pytest.fixture(scope="module")
def hostile():
    item = envscaler.parse_env_item("hostile", {"env_class_name": "Hostile", "env_class_code": HOSTILE_CODE})
    return item.spec({})


def run(box, spec, *names):
    traj = Trajectory("t", "task", spec, tuple(Action(n, {}, turn=i) for i, n in enumerate(names)))
    [(_, result)] = list(box.run([traj]))
    assert result["init"] is not None, result["init_error"]
    return result


@pytest.mark.parametrize(
    "tool, error_type, message",
    [
        ("hang", "Timeout", "exceeded the 3s wall-clock limit"),
        ("crash", "WorkerCrash", "exited with code 3"),
        ("segfault", "WorkerCrash", "killed by signal SIGSEGV"),
        ("eat_memory", "MemoryError", ""),
        ("phone_home", "SandboxRefused", "the sandbox refused syscall 'socket'"),  # outside the seccomp allowlist
        ("fork_bomb", "SandboxRefused", "the sandbox refused syscall 'clone'"),  # clone without CLONE_THREAD
        ("write_outside", "PermissionError", "Permission denied"),  # Landlock
        ("flood", "OutputLimitExceeded", "output limit of 2000 characters"),
    ],
)
def test_misbehaviour_is_an_error_step_and_the_trajectory_goes_on(box, hostile, tool, error_type, message):
    result = run(box, hostile, "bump", tool, "bump")
    before, bad, after = result["steps"]
    assert bad["tool"] == tool and bad["outcome"] == ("sandbox_refused" if error_type == "SandboxRefused" else "error")
    assert bad["error_type"] == error_type, bad["error_message"]
    assert message in bad["error_message"]
    assert bad["raw_observation"].startswith("Error")
    # the next call runs against the state as it was before the bad call (rebuilt if the process died)
    assert after["outcome"] == "success" and after["state_before_hash"] == bad["state_after_hash"]
    assert after["observation_json"] == '{"data":2,"success":true}'


def test_nothing_escaped(box, hostile):
    run(box, hostile, "write_outside", "shell_out")
    assert not os.path.exists("/tmp/envsim-escape.txt")
    assert not os.path.exists("/tmp/envsim-owned")


def test_writes_inside_the_private_directory_are_allowed(box, hostile):
    result = run(box, hostile, "write_inside")
    assert result["steps"][0]["outcome"] == "success"


def test_output_is_captured_per_call(box, hostile):
    step = run(box, hostile, "chatty")["steps"][0]
    assert step["outcome"] == "success" and step["env_output"] == "hello from env code\n"


def test_module_level_state_never_leaks_between_trajectories(box, hostile):
    first = run(box, hostile, "bump", "bump", "bump")
    second = run(box, hostile, "bump", "bump", "bump")
    values = lambda r: [s["observation_json"] for s in r["steps"]]
    assert values(first) == values(second) == [f'{{"data":{i},"success":true}}' for i in (1, 2, 3)]


def test_runaway_bfcl_square_root_is_cut_at_the_timeout(box):
    task = BfclTask("sqrt", "custom", ["MathAPI"], {}, [])
    spec = bfcl_env_spec(task)
    traj = Trajectory(
        "t",
        "sqrt",
        spec,
        (
            Action("square_root", {"number": 2, "precision": 100_000_000}),
            Action("add", {"a": 1, "b": 2}),
        ),
    )
    [(_, result)] = list(box.run([traj]))
    hung, nxt = result["steps"]
    # cut by the wall-clock limit, or by the memory cap when its allocations get there first (in a reused
    # child that ran other trajectories before) — either way an error step, and the next call runs
    assert hung["outcome"] == "error" and hung["error_type"] in ("Timeout", "MemoryError"), hung
    assert nxt["outcome"] == "success"


def test_a_reset_that_hangs_or_raises_is_an_init_error(box):
    code = (
        "class Slow:\n    def __init__(self, cfg):\n        while True:\n            pass\n    def f(self):\n     "
        "   return 1\n"
    )
    item = envscaler.parse_env_item("slow", {"env_class_name": "Slow", "env_class_code": code})
    [(_, result)] = list(box.run([Trajectory("t", "slow", item.spec({}), ())]))
    assert result["init"] is None and "Timeout" in result["init_error"]
    code = (
        "class Bad:\n    def __init__(self, cfg):\n        raise RuntimeError('bad config')\n    def f(self):\n "
        "       return 1\n"
    )
    item = envscaler.parse_env_item("bad", {"env_class_name": "Bad", "env_class_code": code})
    [(_, result)] = list(box.run([Trajectory("t", "bad", item.spec({}), ())]))
    assert result["init"] is None and "RuntimeError: bad config" in result["init_error"]
