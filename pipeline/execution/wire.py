"""Trajectories as plain JSON for the sandbox wire (no pickle crosses the boundary)."""

from __future__ import annotations

from dataclasses import asdict, fields, is_dataclass
from typing import Any

from pipeline.core.environment import EnvSpec
from pipeline.core.trajectory import Action, Trajectory
from pipeline.execution.child import Limits
from pipeline.execution.policy import PolicySettings


def _shallow(obj: Any, names: tuple[str, ...]) -> dict[str, Any]:
    return {name: getattr(obj, name) for name in names}


_ACTION = tuple(f.name for f in fields(Action))
_ENV = tuple(f.name for f in fields(EnvSpec))
_TRAJECTORY = tuple(f.name for f in fields(Trajectory))


def trajectory_to_wire(trajectory: Trajectory) -> dict[str, Any]:
    """The trajectory as plain data, to be encoded at once: its field values are shared, not copied
    (``asdict``'s deep copy of every argument cost more than the encoding)."""
    meta = dict(trajectory.meta)
    if is_dataclass(meta.get("explore")):
        meta["explore"] = asdict(meta["explore"])
    data = _shallow(trajectory, _TRAJECTORY)
    actions = [_shallow(a, _ACTION) for a in trajectory.actions]
    data.update(env=_shallow(trajectory.env, _ENV), actions=actions, meta=meta)
    return data


def trajectory_from_wire(data: dict[str, Any]) -> Trajectory:
    meta = dict(data.get("meta") or {})
    if isinstance(meta.get("explore"), dict):
        known = {f.name for f in fields(PolicySettings)}
        meta["explore"] = PolicySettings(**{k: v for k, v in meta["explore"].items() if k in known})
    known = {f.name for f in fields(Trajectory)}
    values = {k: v for k, v in data.items() if k in known}
    values.update(env=EnvSpec(**data["env"]), actions=tuple(Action(**a) for a in data["actions"]), meta=meta)
    return Trajectory(**values)


def max_frame(limits: Limits) -> int:
    """The largest frame a worker or child may send: two states and some."""
    return (limits.max_state_mb << 20) * 2 + (4 << 20)


def limits_to_wire(limits: Limits) -> dict[str, Any]:
    return asdict(limits)


def limits_from_wire(data: dict[str, Any]) -> Limits:
    known = {f.name for f in fields(Limits)}
    return Limits(**{k: v for k, v in data.items() if k in known})
