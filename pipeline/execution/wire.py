"""Trajectories as plain JSON for the sandbox wire (no pickle crosses the boundary)."""

from __future__ import annotations

from dataclasses import asdict, fields, is_dataclass
from typing import Any

from pipeline.core.environment import EnvSpec
from pipeline.core.trajectory import Action, Trajectory
from pipeline.execution.child import Limits
from pipeline.execution.policy import PolicySettings


def trajectory_to_wire(trajectory: Trajectory) -> dict[str, Any]:
    meta = dict(trajectory.meta)
    if is_dataclass(meta.get("explore")):
        meta["explore"] = asdict(meta["explore"])
    data = {f.name: getattr(trajectory, f.name) for f in fields(Trajectory)}
    data.update(env=asdict(trajectory.env), actions=[asdict(a) for a in trajectory.actions], meta=meta)
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


def limits_to_wire(limits: Limits) -> dict[str, Any]:
    return asdict(limits)


def limits_from_wire(data: dict[str, Any]) -> Limits:
    known = {f.name for f in fields(Limits)}
    return Limits(**{k: v for k, v in data.items() if k in known})
