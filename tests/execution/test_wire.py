"""The sandbox wire form of a trajectory (pipeline/execution/wire.py)."""

from __future__ import annotations

import json

from pipeline.core.environment import EnvSpec
from pipeline.core.trajectory import Action, Trajectory
from pipeline.execution.policy import PolicySettings
from pipeline.execution.wire import trajectory_from_wire, trajectory_to_wire


def _trajectory() -> Trajectory:
    return Trajectory(
        "t1",
        "task",
        EnvSpec("envscaler", "E", {"users": [{"id": 1}]}, {"code_ref": "abc"}),
        (Action("get", {"ids": [1, 2], "filter": {"a": None}}, turn=1, call="get(ids=[1, 2])"), Action("put", {})),
        category="c",
        strategy="explore",
        meta={"explore": PolicySettings(), "note": [1]},
        seed=7,
    )


def test_round_trip_through_json() -> None:
    trajectory = _trajectory()
    assert trajectory_from_wire(json.loads(json.dumps(trajectory_to_wire(trajectory)))) == trajectory


def test_values_are_shared_not_deep_copied() -> None:
    """The wire form is encoded at once: a deep copy of every argument (``asdict``) was pure cost per
    trajectory, in the parent for every request and in the worker for every spare it hands one to."""
    trajectory = _trajectory()
    wire = trajectory_to_wire(trajectory)
    assert wire["actions"][0]["arguments"] is trajectory.actions[0].arguments
    assert wire["env"]["init_config"] is trajectory.env.init_config
    assert wire["meta"] is not trajectory.meta
    assert wire["meta"]["explore"] == json.loads(json.dumps(wire["meta"]["explore"]))
