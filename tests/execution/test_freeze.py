"""Frozen clock and seeded randomness (pipeline.execution.freeze), tested in fresh interpreters the way
a sandbox child uses it: modules preloaded first, ``install``, then environment code exec'd from source."""

import datetime
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pipeline.core import clock
from pipeline.core.environment import EnvSpec
from pipeline.core.trajectory import Trajectory
from pipeline.execution import freeze

ROOT = Path(__file__).resolve().parents[2]

ENV_CODE = """
import datetime, time, random, uuid, secrets, os
from datetime import datetime as DT, date, timedelta
from time import time as now_seconds
from uuid import uuid4

class Clocky:
    def __init__(self, init_config):
        self.events = []

    def stamp(self):
        e = {"id": str(uuid4()), "id1": str(uuid.uuid1()), "at": DT.now().isoformat(),
             "utc": datetime.datetime.utcnow().isoformat(), "today": str(date.today()),
             "t": now_seconds(), "ns": time.time_ns(), "fmt": time.strftime("%Y-%m-%d %H:%M"),
             "lt": list(time.localtime())[:6], "ctime": time.ctime(),
             "r": random.random(), "ri": random.randint(1, 10**9), "sr": random.SystemRandom().random(),
             "tok": secrets.token_hex(8), "below": secrets.randbelow(10**6), "ur": os.urandom(4).hex(),
             "mono_positive": time.monotonic() < time.monotonic(),
             "due": (DT.now() + timedelta(days=3)).isoformat(), "is_dt": isinstance(DT.now(), datetime.datetime)}
        self.events.append(e)
        return e
"""

SCRIPT = textwrap.dedent("""
    import json, sys
    from pipeline.envs import registry
    from pipeline.execution import freeze
    registry.preload_all()              # as the sandbox zygote does before forking
    freeze.install(sys.argv[1], int(sys.argv[2]), sys.argv[3] or None)
    ns = {}
    exec(compile(sys.argv[4], "<env>", "exec"), ns)
    env = ns["Clocky"]({})
    out = {"reset": env.stamp()}
    for i in range(2):
        freeze.at_step(i)
        out[f"step{i}"] = env.stamp()
    from bfcl_eval.eval_checker.multi_turn_eval.func_source_code import travel_booking
    out["bfcl_today"] = str(travel_booking.datetime.today())
    print(json.dumps(out, sort_keys=True))
""")


def _run(trajectory_id: str, seed: int = 0, clock_start: str = "2025-03-01T12:00:00Z") -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, trajectory_id, str(seed), clock_start, ENV_CODE],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "PYTHONHASHSEED": "0"},
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_same_trajectory_same_values_different_trajectory_different_values():
    a, b = _run("env/t1/explore-e0"), _run("env/t1/explore-e0")
    assert a == b
    c = _run("env/t1/explore-e1")
    for key in ("id", "id1", "r", "ri", "sr", "tok", "below", "ur"):
        assert a["step0"][key] != c["step0"][key], key
    assert a["step0"]["at"] == c["step0"]["at"]  # same clock start, same step: same time
    assert _run("env/t1/explore-e0", seed=1)["step0"]["id"] != a["step0"]["id"]


def test_clock_is_frozen_per_step_and_advances_per_step():
    out = _run("x", clock_start="2025-03-01T12:00:00Z")
    assert out["reset"]["at"] == "2025-03-01T12:00:00"
    assert out["step0"]["at"] == "2025-03-01T12:01:00" == clock.step_time("2025-03-01T12:00:00Z", 0)[:19]
    assert out["step1"]["at"] == "2025-03-01T12:02:00"
    assert out["step1"]["today"] == "2025-03-01" and out["step1"]["fmt"] == "2025-03-01 12:02"
    assert out["step1"]["lt"] == [2025, 3, 1, 12, 2, 0]
    assert out["step1"]["t"] == datetime.datetime(2025, 3, 1, 12, 2, tzinfo=datetime.UTC).timestamp()
    assert out["step1"]["ns"] == int(out["step1"]["t"] * 1e9)
    assert out["step1"]["due"] == "2025-03-04T12:02:00" and out["step1"]["is_dt"] is True
    assert out["step0"]["mono_positive"] is True
    assert out["step0"]["id1"][14] == "1" and out["step0"]["id"][14] == "4"  # uuid versions kept
    assert out["bfcl_today"] == "2025-03-01 12:02:00"  # bfcl bound `from datetime import datetime` before install


def test_step_streams_do_not_depend_on_earlier_consumption():
    with freeze.frozen("t", 0, None):
        import random

        freeze.at_step(3)
        first = random.random()
        for _ in range(100):
            random.random()
        freeze.at_step(3)
        assert random.random() == first


def test_frozen_context_restores_everything():
    import os
    import random
    import time
    import uuid

    real = (datetime.datetime, datetime.date, time.time, os.urandom, uuid.uuid4)
    random.seed(5)
    expected = random.random()
    random.seed(5)
    with freeze.frozen("t", 0, "2020-01-01T00:00:00Z"):
        assert datetime.datetime.now() == datetime.datetime(2020, 1, 1)
        assert isinstance(datetime.datetime(1999, 1, 1), freeze.REAL.datetime)
        assert isinstance(freeze.REAL.datetime(1999, 1, 1), datetime.datetime)
        assert repr(datetime.datetime.now()) == "datetime.datetime(2020, 1, 1, 0, 0)"
    assert (datetime.datetime, datetime.date, time.time, os.urandom, uuid.uuid4) == real
    assert random.random() == expected
    assert datetime.datetime.now().year >= 2025


def test_trajectory_carries_seed_and_clock_start():
    env = EnvSpec("envscaler", "e", {}, {})
    t = Trajectory("e/t/x", "t", env, (), seed=4)
    assert t.clock_start == clock.derive_clock_start("e/t/x", 4) and t.clock_start.startswith("2025-")
    assert Trajectory("e/t/x", "t", env, (), seed=4).fingerprint() == t.fingerprint()
    assert Trajectory("e/t/x", "t", env, (), seed=5).fingerprint() != t.fingerprint()
    assert Trajectory("e/t/x", "t", env, (), clock_start="2024-01-01T00:00:00Z").clock_start == "2024-01-01T00:00:00Z"
    with pytest.raises(ValueError, match="not an ISO 8601"):
        Trajectory("e/t/x", "t", env, (), clock_start="yesterday")
