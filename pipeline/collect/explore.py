"""Stratum-targeted exploration: run seeded policy episodes over scenarios until every cell of the
benchmark composition (and every Balance2 group) has enough candidate steps, or the call budget
is spent.

Steering: per (environment, tool) the explorer keeps a histogram of the strata its calls produced;
each new episode weights an environment's tools by how often they hit cells that are still short
(unexplored tools keep weight 1), and raises the mutation rate while failures are short. A cell is
"short" for an environment while the cell lacks candidates or lacks ``min_envs`` distinct
environments and this one has not contributed yet.
"""

from __future__ import annotations

import json
import random
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable, Iterator

from pipeline.core.fields import same_as, setting
from pipeline.execution.policy import PolicySettings
from pipeline.core.trajectory import Action, Trajectory
from pipeline.core.issues import TaskIssue
from pipeline.core.environment import EnvSpec
from pipeline.execution.sandbox import Sandbox
from pipeline.core import profile
from pipeline.core.progress import Progress
from pipeline.core.outcome import FAILURE
from pipeline.core.axes import axis_values
from pipeline.core.strata import RULES, Composition

Log = Callable[[str], None]


@dataclass(frozen=True)
class ExploreSettings:
    """Seeded exploration steered toward the strata still short of their quota."""

    seed: int = setting(0, "Seed of the exploration policy.")
    call_budget: int = setting(factory=lambda: profile.current().explore_call_budget,
                               description="Stop after this many tool calls (default: the profile's budget).")
    episode_length: int = same_as(PolicySettings, "episode_length")
    mutate_rate: float = same_as(PolicySettings, "mutate_rate")  # doubled (at most 0.5) while failures are short
    max_batch: int = same_as(PolicySettings, "max_batch")
    cell_factor: float = setting(2.0, "Candidates wanted per benchmark cell, × its quota.")
    group_factor: float = setting(1.3, "Candidates wanted per Balance2 group, × its size.")
    min_envs: int = setting(10, "Distinct environments wanted per benchmark cell.")
    batch_episodes: int = setting(100, "Episodes run in the sandbox between two updates of the steering.")


@dataclass(frozen=True)
class ScenarioRef:
    """A scenario to explore: an environment spec plus the task it belongs to."""

    task_id: str
    env: EnvSpec
    category: str = "explore"
    task: str = ""  # the natural-language task (for agents)


@dataclass
class Coverage:
    """Candidate counts per benchmark cell / Balance2 group of the composition in force (default:
    the profile's), and the environments behind them."""

    settings: ExploreSettings
    composition: Composition = field(default_factory=lambda: profile.current().composition)
    cells: Counter[str] = field(default_factory=Counter)
    cell_envs: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    groups: Counter[str] = field(default_factory=Counter)
    tool_hits: dict[tuple[str, str], Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    steps: int = 0

    def targets(self) -> dict[str, int]:
        out = {c.name: int(c.quota * self.settings.cell_factor) for c in self.composition.cells}
        out.update({f"b2:{g}": int(n * self.settings.group_factor) for g, n in self.composition.mixture_sizes.items()})
        return out

    def add(self, env_id: str, tool: str, *values: Any, **named: Any) -> None:
        """Count one step of ``env_id`` calling ``tool``: its axis values, a mapping keyed by column (a step
        record; :func:`~pipeline.core.axes.axis_values`)."""
        step = axis_values(*values, **named)
        self.steps += 1
        hits = self.tool_hits[(env_id, tool)]
        hits["_calls"] += 1
        for cell in self.composition.cells_of(step):
            self.cells[cell] += 1
            self.cell_envs[cell].add(env_id)
            hits[cell] += 1
        group = RULES.balance2_group.label(step)
        if group:
            self.groups[group] += 1
            hits[f"b2:{group}"] += 1

    def count(self, key: str) -> int:
        return self.groups[key[3:]] if key.startswith("b2:") else self.cells[key]

    def short(self, env_id: str | None = None) -> dict[str, float]:
        """Deficit (0..1] of every key still short: too few candidates, or too few environments
        (for ``env_id``: only cells this environment has not contributed to yet)."""
        out = {}
        for key, target in self.targets().items():
            have = self.count(key)
            deficit = max(0.0, (target - have) / target) if target else 0.0
            if not key.startswith("b2:"):
                envs = self.cell_envs.get(key, set())
                if len(envs) < self.settings.min_envs and (env_id is None or env_id not in envs):
                    deficit = max(deficit, 0.5)
            if deficit > 0:
                out[key] = deficit
        return out

    def satisfied(self) -> bool:
        return not self.short()

    def tool_weights(self, env_id: str, tools: Iterable[str]) -> dict[str, float]:
        short = self.short(env_id)
        weights = {}
        for tool in tools:
            hits = self.tool_hits.get((env_id, tool))
            calls = hits["_calls"] if hits else 0
            if calls < 8:
                weights[tool] = 1.0  # still unexplored
                continue
            gain = sum(deficit * hits[key] / calls for key, deficit in short.items())
            weights[tool] = 0.05 + 4.0 * gain
        return weights


def explore(
    scenarios: list[ScenarioRef],
    tool_names: Callable[[EnvSpec], list[str]],
    sandbox: Sandbox,
    settings: ExploreSettings,
    coverage: Coverage | None = None,
    log: Log = lambda _m: None,
) -> Iterator[tuple[Trajectory, dict] | TaskIssue]:
    """Yield explored trajectories (with their sandbox result, which carries the initial state)
    and an issue per scenario whose environment cannot be reset."""
    coverage = coverage or Coverage(settings)
    # failure cells (and the Balance2 failure group) short: mutate more
    failure_keys = {c.name for c in coverage.composition.cells if c.outcome == FAILURE} | {f"b2:{FAILURE}"}
    targets = len(coverage.targets())
    # the total is the call budget (exploration's hard bound, known up front); it stops earlier when every
    # coverage target is met, which the line counts beside it
    progress = Progress("exploration", settings.call_budget, log, unit="calls", finish_at_total=False,
                        detail=lambda: f"{targets - len(coverage.short())}/{targets} coverage targets met")
    progress.advance(min(coverage.steps, settings.call_budget))  # a coverage carried in from earlier
    live = list(scenarios)
    rounds: Counter[str] = Counter()
    cursor = 0
    while live and coverage.steps < settings.call_budget and not coverage.satisfied():
        batch = []
        for _ in range(min(settings.batch_episodes, len(live))):
            ref = live[cursor % len(live)]
            cursor += 1
            episode = rounds[ref.task_id]
            rounds[ref.task_id] += 1
            failure_short = bool(failure_keys & set(coverage.short()))
            policy = PolicySettings(
                seed=random.Random(f"{settings.seed}:{ref.task_id}:{episode}").randrange(2**31),
                episode_length=settings.episode_length,
                mutate_rate=min(0.5, settings.mutate_rate * (2 if failure_short else 1)),
                max_batch=settings.max_batch,
                tool_weights=coverage.tool_weights(ref.env.env_id, tool_names(ref.env)),
            )
            batch.append(
                Trajectory(
                    trajectory_id=f"{ref.env.env_id}/{ref.task_id}/explore-s{settings.seed}-e{episode}",
                    task_id=ref.task_id,
                    env=ref.env,
                    actions=(),
                    category=ref.category,
                    strategy="explore",
                    meta={"explore": policy},
                    seed=settings.seed,
                )
            )
        dead: set[str] = set()
        for traj, result in sandbox.run(batch):
            if result["init"] is None:
                dead.add(traj.task_id)
                yield TaskIssue(traj.task_id, "reset", result["init_error"] or "reset failed", "")
                continue
            for step in result["steps"]:
                coverage.add(traj.env_id, step["tool"], step)
            progress.advance(len(result["steps"]))
            actions = tuple(  # what the policy did, which argument it mutated, and the s'_t it saw
                Action(s["tool"], json.loads(s["arguments_json"]), turn=s["step_index"],
                       mutated_arg=s.get("mutated_arg"), observed_after_hash=s.get("state_after_hash"))
                for s in result["steps"]
            )
            yield replace(traj, actions=actions, meta={}), result
        if dead:
            live = [s for s in live if s.task_id not in dead]
    short = sorted(coverage.short())
    if not short:
        why = "every coverage target met"
    elif coverage.steps >= settings.call_budget:
        why = "call budget spent; short: " + ", ".join(short)
    else:
        why = "no scenario left to explore; short: " + ", ".join(short)
    progress.finish(why)
