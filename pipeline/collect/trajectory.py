"""Trajectories: an environment spec plus the ordered actions an agent took."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from pipeline.envs.protocol import EnvSpec


@dataclass(frozen=True)
class Action:
    name: str
    arguments: dict[str, Any]
    turn: int = 0
    call: str = ""  # original call text, when the action came from a string


@dataclass(frozen=True)
class Trajectory:
    trajectory_id: str
    task_id: str
    env: EnvSpec
    actions: tuple[Action, ...]
    category: str = ""
    strategy: str = "ground_truth"
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def source(self) -> str:
        return self.env.source

    @property
    def env_id(self) -> str:
        return self.env.env_id

    def fingerprint(self) -> str:
        """Content hash of everything that determines the labels of this trajectory."""
        # no sort_keys: dict order of an init config can change what the env code builds
        payload = json.dumps(
            {"env": asdict(self.env), "actions": [asdict(a) for a in self.actions]},
            default=repr,
            separators=(",", ":"),
        )
        return hashlib.blake2b(payload.encode(), digest_size=16).hexdigest()
