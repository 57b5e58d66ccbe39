"""Trajectories: an environment spec plus the ordered actions an agent took."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, fields
from functools import cached_property
from typing import Any

from pipeline.core.clock import derive_clock_start, parse_clock_start
from pipeline.core.environment import EnvSpec


@dataclass(frozen=True)
class Action:
    name: str
    arguments: dict[str, Any]
    turn: int = 0
    call: str = ""  # original call text, when the action came from a string
    mutated_arg: str | None = None  # exploration: the argument deliberately mutated (a wrong id, a bad value)
    observed_after_hash: str | None = None  # exploration: s'_t hash seen when the policy ran the call


@dataclass(frozen=True)
class Trajectory:
    trajectory_id: str
    task_id: str
    env: EnvSpec
    actions: tuple[Action, ...]
    category: str = ""
    strategy: str = "ground_truth"
    meta: dict[str, Any] = field(default_factory=dict)
    seed: int = 0  # run seed: with the trajectory id it seeds random, uuid, secrets, os.urandom in the sandbox
    clock_start: str = ""  # ISO 8601 start of the frozen clock; empty: derived from (seed, trajectory id)

    def __post_init__(self) -> None:
        if not self.clock_start:
            object.__setattr__(self, "clock_start", derive_clock_start(self.trajectory_id, self.seed))
        else:
            parse_clock_start(self.clock_start)  # fail early, naming the value

    @property
    def source(self) -> str:
        return self.env.source

    @property
    def env_id(self) -> str:
        return self.env.env_id

    @cached_property
    def _fingerprint(self) -> str:
        # no sort_keys: dict order of an init config can change what the env code builds. The payload is
        # what ``asdict`` gives, built without its deep copies (a trajectory's config can be large). A field added
        # to EnvSpec changes every fingerprint, and so every stored trajectory's reuse key.
        env = {f.name: getattr(self.env, f.name) for f in fields(self.env)}
        actions = [
            {"name": a.name, "arguments": a.arguments, "turn": a.turn, "call": a.call, "mutated_arg": a.mutated_arg}
            for a in self.actions
        ]
        payload = json.dumps(
            {"env": env, "actions": actions, "seed": self.seed, "clock_start": self.clock_start},
            default=repr,
            separators=(",", ":"),
        )
        return hashlib.blake2b(payload.encode(), digest_size=16).hexdigest()

    def fingerprint(self) -> str:
        """Content hash of everything that determines the labels of this trajectory (computed once)."""
        return self._fingerprint
