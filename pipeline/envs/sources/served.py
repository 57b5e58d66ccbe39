"""Served episodes (``./forge serve-env``, the ``gem.Env`` and TRL adapters): each line of the data root's
``served/episodes.jsonl`` is one episode an agent played on an environment of another source; its calls are
replayed and labeled as a trajectory of category ``served``. No file, no trajectories."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pipeline.core.clock import derive_clock_start
from pipeline.core.environment import EnvSpec
from pipeline.core.fields import setting
from pipeline.core.issues import TaskIssue
from pipeline.core.trajectory import Action, Trajectory
from pipeline.envs.config import SourceConfig, SourceSettings
from pipeline.envs.records import FirstSeen, clip, read_lines, undecodable
from pipeline.envs.source import EnvironmentSource

NAME = "served"
#: the episode log under the data root (``pipeline.serve.run.EpisodeLog`` appends to it)
EPISODES = Path("served") / "episodes.jsonl"
#: the fields of a recorded environment spec, and their types
ENV_FIELDS = {"source": str, "env_id": str, "init_config": dict, "options": dict}


@dataclasses.dataclass(frozen=True)
class ServedSettings(SourceSettings):
    """Episodes served to agents (``./forge serve-env``), replayed and labeled as trajectories."""

    enabled: bool = setting(True, "Take in the served episodes.")
    episodes: str = setting("", "The episode log; empty: the data root's served/episodes.jsonl.")


def episode_problem(row: Any) -> str | None:
    """Why a parsed line of the episode log is not a served episode (shape and types), or None."""
    if not isinstance(row, dict):
        return f"expected a JSON object, got a {type(row).__name__}"
    bad = undecodable(row)
    if bad:
        return bad
    for key in ("task_id", "served_task_id"):
        if not isinstance(row.get(key), str):
            return f"{key!r} must be a string, got {clip(repr(row.get(key)), 60)}"
    env = row.get("env")
    if not isinstance(env, dict) or set(map(str, env)) - set(ENV_FIELDS):
        return f"'env' must be an environment object {sorted(ENV_FIELDS)}, got {clip(repr(env), 120)}"
    for key, kind in ENV_FIELDS.items():
        if (key in ("source", "env_id") and key not in env) or (key in env and not isinstance(env[key], kind)):
            return f"'env.{key}' must be a {kind.__name__}, got {clip(repr(env.get(key)), 80)}"
    if not isinstance(row.get("seed", 0), int):
        return f"'seed' must be an integer, got {clip(repr(row.get('seed')), 60)}"
    steps = row.get("steps")
    if not isinstance(steps, list) or not all(
        isinstance(s, dict) and isinstance(s.get("tool"), str) and isinstance(s.get("arguments"), dict) for s in steps
    ):
        return f"'steps' must be a list of {{tool, arguments}} objects, got {clip(repr(steps), 120)}"
    return None


def episode_trajectories(path: Path) -> Iterator[Trajectory | TaskIssue]:
    """Every episode of the log ``path`` as a trajectory (category ``served``, its calls replayed from the episode's
    environment on the clock and seed it was served with), or a one-line issue naming the line."""
    ids = FirstSeen()
    for lineno, line, err in read_lines(path):
        origin = f"{path.name}:{lineno}"
        row: Any = None
        problem = err
        if problem is None:
            try:
                row = json.loads(line or "")
            except (ValueError, RecursionError) as exc:
                problem = f"line is not JSON: {clip(exc, 120)}"
        problem = problem or episode_problem(row)
        task_id = row.get("task_id") if isinstance(row, dict) and isinstance(row.get("task_id"), str) else origin
        if problem is not None:
            why = f"not a served episode: {problem}: fix or drop the line"
            yield TaskIssue(clip(task_id, 200), "parse", why, origin)
            continue
        env = EnvSpec(**row["env"])
        trajectory_id = f"{env.env_id}/{task_id}/served"
        first = ids.seen(trajectory_id, origin)
        if first is not None:
            why = ids.message(f"served episode on {env.env_id}:", task_id, origin, first)
            yield TaskIssue(task_id, "parse", why, origin)
            continue
        seed = int(row.get("seed", 0))
        yield Trajectory(
            trajectory_id,
            task_id,
            env,
            tuple(Action(s["tool"], s["arguments"]) for s in row["steps"]),
            category=NAME,
            strategy=f"served-{row.get('mode') or 'exec'}",
            meta={k: row.get(k) for k in ("served_task_id", "episode_id", "mode", "simulator", "reward")}
            | {"origin": origin},
            seed=seed,
            clock_start=derive_clock_start(f"served/{row['served_task_id']}/{seed}", seed),
        )


class ServedSource(EnvironmentSource):
    """Served episodes (:class:`ServedSettings`): trajectories on the other sources' environments."""

    name = NAME
    settings = ServedSettings
    foreign = True

    def log(self, cfg: SourceConfig) -> Path | None:
        """The episode log when enabled and present."""
        own = cfg.of(self)
        path = Path(own.episodes) if own.enabled and own.episodes else None
        return path if path is not None and path.is_file() else None

    def why_disabled(self, cfg: SourceConfig) -> str | None:
        """Off only when switched off: without a log it lists nothing and brings nothing, so a run without served
        episodes says and writes what it would without this source."""
        return None if cfg.of(self).enabled else "served episodes are off (resources.sources.served.enabled: false)"

    def files(self, cfg: SourceConfig) -> list[tuple[str, Path]]:
        path = self.log(cfg)
        return [("served.episodes", path)] if path is not None else []

    def at_root(self, value: ServedSettings, root: Path) -> ServedSettings:
        return value if value.episodes else dataclasses.replace(value, episodes=str(root / EPISODES))

    def replay(self, cfg: SourceConfig) -> Iterator[Trajectory | TaskIssue]:
        path = self.log(cfg)
        if path is not None:
            yield from episode_trajectories(path)
