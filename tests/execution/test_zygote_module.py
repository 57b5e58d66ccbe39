"""One environment's zygote runs its module body once and every fresh child starts with it (docs/environments.md,
"Sandbox"): a corpus's trajectories each in a child that ran nothing else, but none running the body again — unless
the body read the clock or drew a random number, which a child would read otherwise; the labels are the same as
in-process either way."""

from __future__ import annotations

from pipeline.core.trajectory import Action, Trajectory
from pipeline.envs import envscaler
from pipeline.execution.child import Limits, execute
from pipeline.execution.freeze import frozen
from pipeline.execution.labels import TrajectoryLabels
from pipeline.execution.sandbox import Sandbox

#: ``where`` says whether the body ran in the process that answers (False: it ran before the fork, in the zygote)
QUIET = r"""
import os

BODY_PID = os.getpid()

class Counter:
    def __init__(self, init_config=None):
        self.n = 0

    def where(self):
        self.n += 1
        return {"success": True, "here": BODY_PID == os.getpid(), "n": self.n}
"""

#: the same, with a body that reads the clock and draws a number (a child would read and draw otherwise)
CLOCKED = QUIET.replace("import os\n", "import os, random, time\nSTARTED = time.time()\nTOKEN = random.random()\n")
CLOCKED = CLOCKED.replace('"n": self.n}', '"n": self.n, "started": STARTED, "token": TOKEN}')

#: a typed corpus's body: it imports pydantic (whose first import reads the clock, as a child, which finds it
#: imported, would not) and creates a model class
TYPED = QUIET.replace(
    "import os\n", "import os\nimport pydantic\n\nclass Line(pydantic.BaseModel):\n    line_id: str\n"
)

LIMITS = Limits(call_timeout_s=10, memory_mb=512, tmp_mb=48)


def _trajectories(code: str, count: int) -> list[Trajectory]:
    item = envscaler.parse_env_item("counter", {"env_class_name": "Counter", "env_class_code": code})
    assert not item.problems, item.problems
    return [
        Trajectory(f"counter/t{k}", f"t{k}", item.spec({}), (Action("where", {}, turn=0), Action("where", {}, turn=1)))
        for k in range(count)
    ]


def _in_process(trajectory: Trajectory) -> list:
    labels = TrajectoryLabels(trajectory, LIMITS.max_observation_chars)
    with frozen(trajectory.trajectory_id, trajectory.seed, trajectory.clock_start):
        execute(trajectory, labels.feed, LIMITS)
    return labels.result["steps"]


def _key(steps: list) -> list:
    return [(s["raw_observation"], s["outcome"], s["state_after_hash"], s["delta_size"]) for s in steps]


def _sandboxed(code: str, count: int) -> list[list]:
    with Sandbox(workers=1, limits=LIMITS) as box:
        results = [r for _, r in box.run(_trajectories(code, count))]
    assert all(r["init"] is not None for r in results), [r["init_error"] for r in results]
    return [r["steps"] for r in results]


def test_the_module_body_runs_once_in_the_zygote_and_each_child_starts_fresh_from_it():
    runs = _sandboxed(QUIET, 6)
    here = [s["raw_observation"] for steps in runs for s in steps]
    # the first trajectory's child is forked before the zygote holds the module; every later one from a spare
    assert sum("'here': False" in o for o in here) >= 8, here
    assert all("'n': 1" in steps[0]["raw_observation"] and "'n': 2" in steps[1]["raw_observation"] for steps in runs)


def test_a_body_whose_imports_read_the_clock_on_their_first_import_still_runs_once():
    runs = _sandboxed(TYPED, 6)
    here = [s["raw_observation"] for steps in runs for s in steps]
    assert sum("'here': False" in o for o in here) >= 8, here


def test_a_body_that_reads_the_clock_or_draws_runs_in_each_child_and_labels_as_in_process():
    trajectories = _trajectories(CLOCKED, 5)
    runs = _sandboxed(CLOCKED, 5)
    assert all("'here': True" in s["raw_observation"] for steps in runs for s in steps)
    assert [_key(steps) for steps in runs] == [_key(_in_process(t)) for t in trajectories]


#: a body that starts a thread (a child may: threads are allowed; the zygote cannot fork safely after it, so it ends
#: and each child runs the body itself)
THREADED = QUIET.replace(
    "import os\n", "import os, threading, time\nthreading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n"
)


def test_a_body_that_starts_a_thread_runs_in_every_child_and_labels_as_in_process():
    trajectories = _trajectories(THREADED, 4)
    runs = _sandboxed(THREADED, 4)
    assert all("'here': True" in s["raw_observation"] for steps in runs for s in steps)
    assert [_key(steps) for steps in runs] == [_key(_in_process(t)) for t in trajectories]


def test_an_environment_with_many_trajectories_runs_on_an_instance_per_worker_with_the_same_labels():
    count = 2 * Sandbox.min_lane
    with Sandbox(workers=2, limits=LIMITS) as box:
        two = [r["steps"] for _, r in box.run(_trajectories(CLOCKED, count))]
        assert box.instances_started == 2  # side by side, each of this one environment only
    assert [_key(steps) for steps in two] == [_key(steps) for steps in _sandboxed(CLOCKED, count)]
