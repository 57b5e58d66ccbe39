"""Stratum-targeted exploration: run seeded policy episodes over scenarios until every cell of the
benchmark composition (and every Balance2 group) has enough candidate steps — or cannot get them from the
environments at hand — or the call budget is spent.

Steering: per (environment, tool) the explorer keeps a histogram of the strata its calls produced;
each new episode weights an environment's tools by how often they hit cells that are still short
(a tool that may still show something new keeps the weight of an untried tool), and raises the mutation
rate while failures are short. A cell is "short" for an environment while the cell lacks candidates or lacks
``min_envs`` distinct environments and this one has not contributed yet.

Adapting to the corpus: per tool the explorer also keeps what it has *shown* (:class:`ToolShown`: the
(outcome, |Δ|, argument count) of its calls and its largest |Δ|). A tool that has shown nothing new for
``plateau_calls`` calls has plateaued: what it can reach is taken to be what it has shown. A target that no
environment under exploration can still approach — each of whose tools plateaued without a step that
qualifies, or, for a cell short of environments, that every environment able to reach it has contributed to
already — is *unreachable*: it leaves the steering, an environment that can help no target still short is no
longer explored, and exploration stops once every target is met or unreachable (:meth:`Coverage.unreachable`
says why, e.g. ``difficult (|Δ| 7–12): unreachable, max |Δ| seen 3``). A tool that has not plateaued keeps at
least the weight of an untried tool, so a rarely chosen tool is tried enough before its environment is judged.
Every decision is made from the steps seen, in the order the sandbox returns them (input order): the same seed
gives the same trajectories.

Budget: unset, it scales with the corpus: ``calls_per_environment`` × the environments explored, at most
``max_call_budget`` (the profile's ``explore_call_budget``); an explicit ``call_budget`` is used as it is.
"""

from __future__ import annotations

import json
import random
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pipeline.core import profile
from pipeline.core.axes import ARGS, DELTA, OUTCOME, OneOf, Range, When, axis_values
from pipeline.core.environment import EnvSpec
from pipeline.core.fields import same_as, setting
from pipeline.core.issues import TaskIssue
from pipeline.core.outcome import FAILURE, SUCCESS
from pipeline.core.progress import Log, Progress
from pipeline.core.strata import RULES, Composition
from pipeline.core.trajectory import Action, Trajectory
from pipeline.execution.policy import PolicySettings
from pipeline.execution.sandbox import Sandbox

#: calls a tool gets at the weight of an untried tool before the steering weighs it by what it hit
UNTRIED_CALLS = 8


@dataclass(frozen=True)
class ExploreSettings:
    """Seeded exploration steered toward the strata still short of their quota."""

    seed: int = setting(0, "Seed of the exploration policy.")
    call_budget: int | None = setting(
        None,
        "Stop after this many tool calls (unset: `calls_per_environment` × the "
        "environments explored, at most `max_call_budget`).",
    )
    max_call_budget: int = setting(
        profile.DEFAULT.explore_call_budget,
        "The largest budget an unset `call_budget` scales to (default: the `default` "
        "profile's `explore_call_budget`; the `composition` resource passes the profile's).",
    )
    calls_per_environment: int = setting(3_000, "Tool calls per explored environment an unset `call_budget` allows.")
    plateau_calls: int = setting(
        100,
        "A tool that has shown nothing new (no new combination of outcome, |Δ| and "
        "argument count) for this many calls has plateaued: what it reaches is what it has shown.",
    )
    episode_length: int = same_as(PolicySettings, "episode_length")
    mutate_rate: float = same_as(PolicySettings, "mutate_rate")  # doubled (at most 0.5) while failures are short
    max_batch: int = same_as(PolicySettings, "max_batch")
    cell_factor: float = setting(2.0, "Candidates wanted per benchmark cell, × its quota.")
    group_factor: float = setting(1.3, "Candidates wanted per Balance2 group, × its size.")
    min_envs: int = setting(10, "Distinct environments wanted per benchmark cell.")
    batch_episodes: int = setting(100, "Episodes run in the sandbox between two updates of the steering.")

    def budget(self, environments: int) -> int:
        """The call budget for ``environments`` explored environments: ``call_budget`` when set, else
        ``calls_per_environment`` × ``environments``, at most ``max_call_budget``."""
        if self.call_budget is not None:
            return self.call_budget
        return min(self.max_call_budget, self.calls_per_environment * environments)

    def budget_text(self, environments: int) -> str:
        """Where :meth:`budget` comes from, in words."""
        budget = self.budget(environments)
        if self.call_budget is not None:
            return f"{budget:,} calls (call_budget)"
        scaled = self.calls_per_environment * environments
        text = f"{self.calls_per_environment:,} per environment × {environments} environment{'s' * (environments != 1)}"
        return (
            f"{budget:,} calls: {text}"
            if scaled <= self.max_call_budget
            else f"{budget:,} calls: max_call_budget ({text} = {scaled:,})"
        )


@dataclass(frozen=True)
class ScenarioRef:
    """A scenario to explore: an environment spec plus the task it belongs to."""

    task_id: str
    env: EnvSpec
    category: str = "explore"
    task: str = ""  # the natural-language task (for agents)


@dataclass
class ToolShown:
    """What one tool of one environment has shown so far: the (outcome, |Δ|, argument count) of its calls
    (|Δ| capped where no target tells values apart), its largest |Δ|, and how many calls ago it last showed
    something new (``quiet``)."""

    calls: int = 0
    max_delta: int = 0
    seen: set[tuple[str, int, int]] = field(default_factory=set)
    quiet: int = 0

    def see(self, outcome: str, delta: int, args: int, horizon: int) -> None:
        point = (outcome, min(delta, horizon), args)
        self.calls += 1
        self.max_delta = max(self.max_delta, delta)
        self.quiet = self.quiet + 1 if point in self.seen else 0
        self.seen.add(point)

    def plateaued(self, window: int) -> bool:
        return self.calls >= UNTRIED_CALLS and self.quiet >= window

    def to_dict(self) -> dict[str, Any]:
        return {"calls": self.calls, "max_delta": self.max_delta, "seen": sorted(self.seen), "quiet": self.quiet}

    @classmethod
    def of(cls, d: Mapping[str, Any]) -> ToolShown:
        return cls(d["calls"], d["max_delta"], {tuple(p) for p in d["seen"]}, d["quiet"])


def _range_text(r: Range) -> str:
    if r.hi is None:
        return f"≥ {r.lo}"
    return f"{r.lo}" if r.lo == r.hi else f"{r.lo}–{r.hi}"


def _values_text(values: Iterable[int], cap: int | None = None) -> str:
    """``0–3, 8``: distinct values, runs as ranges (``cap``, which stands for itself and above: ``14+``)."""
    runs: list[list[int]] = []
    for v in sorted(set(values)):
        if runs and v == runs[-1][1] + 1:
            runs[-1][1] = v
        else:
            runs.append([v, v])
    plus = lambda v: f"{v}+" if v == cap else f"{v}"  # noqa: E731
    return ", ".join(plus(a) if a == b else f"{a}–{plus(b)}" for a, b in runs)


def _predicate_text(when: When) -> str:
    """A target's rule in words: outcome (when not success), |Δ| range, argument count."""
    cond = dict(when.conditions)
    parts = []
    outcome = cond.get(OUTCOME.column)
    if isinstance(outcome, OneOf) and outcome.values != (SUCCESS,):
        parts.append("/".join(outcome.values))
    if isinstance(delta := cond.get(DELTA.column), Range):
        parts.append(f"|Δ| {_range_text(delta)}")
    if isinstance(args := cond.get(ARGS.column), Range):
        parts.append(f"{_range_text(args)} argument{'s' * (args.lo != 1 or args.hi != 1)}")
    return ", ".join(parts)


@dataclass
class Coverage:
    """Candidate counts per benchmark cell / Balance2 group of the composition in force (default:
    the ``default`` profile's), the environments behind them, and what each explored tool has shown."""

    settings: ExploreSettings
    composition: Composition = field(default_factory=lambda: profile.DEFAULT.composition)
    cells: Counter[str] = field(default_factory=Counter)
    cell_envs: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    groups: Counter[str] = field(default_factory=Counter)
    tool_hits: dict[tuple[str, str], Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    steps: int = 0
    #: what each (environment, tool) has shown (:class:`ToolShown`)
    shown: dict[tuple[str, str], ToolShown] = field(default_factory=lambda: defaultdict(ToolShown))
    #: the environments under exploration (with a scenario left) and their tools; empty: reachability is not judged
    tools: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: the call budget exploration ran under, and why it stopped (set by :func:`explore`)
    call_budget: int | None = None
    stop_reason: str = ""
    _version: int = field(default=0, repr=False, compare=False)
    _cache: dict[Any, Any] = field(default_factory=dict, repr=False, compare=False)

    def targets(self) -> dict[str, int]:
        out = {c.name: int(c.quota * self.settings.cell_factor) for c in self.composition.cells}
        out.update({f"b2:{g}": int(n * self.settings.group_factor) for g, n in self.composition.mixture_sizes.items()})
        return out

    def add(self, env_id: str, tool: str, *values: Any, **named: Any) -> None:
        """Count one step of ``env_id`` calling ``tool``: its axis values, a mapping keyed by column (a step
        record; :func:`~pipeline.core.axes.axis_values`)."""
        step = axis_values(*values, **named)
        self.steps += 1
        self._version += 1
        hits = self.tool_hits[(env_id, tool)]
        hits["_calls"] += 1
        self.shown[(env_id, tool)].see(
            step[OUTCOME.column], int(step[DELTA.column]), int(step[ARGS.column]), self._delta_horizon()
        )
        for cell in self.composition.cells_of(step):
            self.cells[cell] += 1
            self.cell_envs[cell].add(env_id)
            hits[cell] += 1
        group = RULES.balance2_group.label(step)
        if group:
            self.groups[group] += 1
            hits[f"b2:{group}"] += 1

    def explore_envs(self, tools: Mapping[str, Iterable[str]]) -> None:
        """The environments under exploration from now on, with their tools (the judge of reachability)."""
        self.tools = {env: tuple(names) for env, names in tools.items()}
        self._version += 1

    def count(self, key: str) -> int:
        return self.groups[key[3:]] if key.startswith("b2:") else self.cells[key]

    # -- what the targets need, and what the environments can still give -------------------------------------

    def _rule(self, key: str) -> When:
        """The predicate of a target (a cell's rule, a Balance2 group's)."""
        if key.startswith("b2:"):
            return next(r.when for r in RULES.balance2_group.rules if r.label == key[3:])
        return next(c.when for c in self.composition.cells if c.name == key)

    def _matches(self, key: str, point: Mapping[str, Any]) -> bool:
        if key.startswith("b2:"):
            return RULES.balance2_group.label(point) == key[3:]
        return next(c for c in self.composition.cells if c.name == key).when.matches(point)

    def describe(self, key: str) -> str:
        """A target and its rule: ``difficult (|Δ| 7–12)``."""
        text = _predicate_text(self._rule(key))
        return f"{key} ({text})" if text else key

    def _delta_horizon(self) -> int:
        """|Δ| from which no target rule tells two values apart (above every finite bound)."""
        if "horizon" not in self._cache:
            bounds = [0]
            for when in [c.when for c in self.composition.cells] + [r.when for r in RULES.balance2_group.rules]:
                for column, cond in when.conditions:
                    if column == DELTA.column and isinstance(cond, Range):
                        bounds.append(cond.lo if cond.hi is None else cond.hi)
            self._cache["horizon"] = max(bounds) + 1
        return self._cache["horizon"]

    def _tool_reaches(self, shown: ToolShown) -> frozenset[str]:
        """The targets a plateaued tool reaches: those a step it has shown qualifies for."""
        memo = self._cache.setdefault("tools", {})
        key = frozenset(shown.seen)
        if key not in memo:
            memo[key] = frozenset(
                target
                for target in self.targets()
                if any(self._matches(target, {OUTCOME.column: o, DELTA.column: d, ARGS.column: a}) for o, d, a in key)
            )
        return memo[key]

    def reaches(self, env_id: str) -> frozenset[str] | None:
        """The targets ``env_id`` can still approach; None: any (one of its tools may still show something new)."""
        reached: set[str] = set()
        for tool in self.tools.get(env_id, ()):
            shown = self.shown.get((env_id, tool))
            if shown is None or not shown.plateaued(self.settings.plateau_calls):
                return None
            reached |= self._tool_reaches(shown)
        return frozenset(reached)

    def _deficits(self, key: str, target: int) -> tuple[float, bool]:
        """(candidate deficit 0..1, whether a cell lacks environments)."""
        have = self.count(key)
        deficit = max(0.0, (target - have) / target) if target else 0.0
        few_envs = not key.startswith("b2:") and len(self.cell_envs.get(key, ())) < self.settings.min_envs
        return deficit, few_envs

    def unreachable(self) -> dict[str, str]:
        """Every target still short that no environment under exploration can approach, with why
        (``unreachable, max |Δ| seen 3``). Nothing is unreachable while no environment is under exploration."""
        if self._cache.get("unreachable", (None,))[0] == self._version:
            return self._cache["unreachable"][1]
        out: dict[str, str] = {}
        if self.tools:
            reach = {env: self.reaches(env) for env in self.tools}
            for key, target in self.targets().items():
                deficit, few_envs = self._deficits(key, target)
                if not deficit and not few_envs:
                    continue
                able = [env for env, r in reach.items() if r is None or key in r]
                envs = self.cell_envs.get(key, set())
                if (deficit and able) or (few_envs and any(env not in envs for env in able)):
                    continue
                out[key] = self._why(key, bool(deficit), len(envs))
        self._cache["unreachable"] = (self._version, out)
        return out

    def _why(self, key: str, lacks_candidates: bool, environments: int) -> str:
        if not lacks_candidates:
            return (
                f"unreachable, {environments} of the {self.settings.min_envs} environments wanted: "
                "every environment that reaches it has contributed"
            )
        shown = [s for s in self.shown.values() if s.calls]
        seen = {point for s in shown for point in s.seen}
        cond = dict(self._rule(key).conditions)
        delta, outcome, args = cond.get(DELTA.column), cond.get(OUTCOME.column), cond.get(ARGS.column)
        top = max((s.max_delta for s in shown), default=0)
        if isinstance(delta, Range) and top < delta.lo:
            return f"unreachable, max |Δ| seen {top}"
        if isinstance(outcome, OneOf) and not any(o in outcome.values for o, _, _ in seen):
            return f"unreachable, no {'/'.join(outcome.values)} step seen"
        if isinstance(args, Range) and not any(args.matches(a) for _, _, a in seen):
            return f"unreachable, argument counts seen: {_values_text(a for _, _, a in seen)}"
        return f"unreachable, |Δ| seen: {_values_text((d for _, d, _ in seen), self._delta_horizon())}"

    def unreachable_lines(self) -> list[str]:
        """``difficult (|Δ| 7–12): unreachable, max |Δ| seen 3`` for each unreachable target."""
        return [f"{self.describe(key)}: {why}" for key, why in self.unreachable().items()]

    def short(self, env_id: str | None = None) -> dict[str, float]:
        """Deficit (0..1] of every key still short and not unreachable: too few candidates, or too few
        environments (for ``env_id``: only cells this environment has not contributed to yet)."""
        out = {}
        dropped = self.unreachable()
        for key, target in self.targets().items():
            if key in dropped:
                continue
            deficit, few_envs = self._deficits(key, target)
            if few_envs and (env_id is None or env_id not in self.cell_envs.get(key, set())):
                deficit = max(deficit, 0.5)
            if deficit > 0:
                out[key] = deficit
        return out

    def status(self, key: str) -> str:
        """``met``, ``short`` or why a target is unreachable (``unreachable, max |Δ| seen 3``)."""
        return self.unreachable().get(key) or ("short" if key in self.short() else "met")

    def satisfied(self) -> bool:
        """Every target met or unreachable."""
        return not self.short()

    def worth_exploring(self, env_id: str) -> bool:
        """Whether ``env_id`` may still help a target: a tool of it has not plateaued, or it reaches a target
        still short for it."""
        reached = self.reaches(env_id)
        return reached is None or bool(reached & set(self.short(env_id)))

    def tool_weights(self, env_id: str, tools: Iterable[str]) -> dict[str, float]:
        short = self.short(env_id)
        weights = {}
        for tool in tools:
            hits = self.tool_hits.get((env_id, tool))
            calls = hits["_calls"] if hits else 0
            if calls < UNTRIED_CALLS:
                weights[tool] = 1.0  # still unexplored
                continue
            gain = sum(deficit * hits[key] / calls for key, deficit in short.items())
            weights[tool] = 0.05 + 4.0 * gain
            shown = self.shown.get((env_id, tool))
            if shown is not None and not shown.plateaued(self.settings.plateau_calls):
                weights[tool] = max(weights[tool], 1.0)  # may still show something new: explored as an untried tool
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
    env_tools: dict[str, list[str]] = {}
    for ref in scenarios:
        if ref.env.env_id not in env_tools:
            env_tools[ref.env.env_id] = tool_names(ref.env)
    coverage.explore_envs(env_tools)
    budget = coverage.call_budget = settings.budget(len(env_tools))
    # failure cells (and the Balance2 failure group) short: mutate more
    failure_keys = {c.name for c in coverage.composition.cells if c.outcome == FAILURE} | {f"b2:{FAILURE}"}
    targets = len(coverage.targets())

    def detail() -> str:
        unreachable = len(coverage.unreachable())
        met = targets - len(coverage.short()) - unreachable
        return f"{met}/{targets} coverage targets met" + (f", {unreachable} unreachable" if unreachable else "")

    # the total is the call budget (exploration's hard bound, known up front); it stops earlier when every
    # coverage target is met or unreachable, which the line counts beside it
    progress = Progress("exploration", budget, log, unit="calls", finish_at_total=False, detail=detail)
    progress.advance(min(coverage.steps, budget))  # a coverage carried in from earlier
    live = list(scenarios)
    rounds: Counter[str] = Counter()
    cursor = 0
    while live and coverage.steps < budget and not coverage.satisfied():
        batch = []
        worth = {env: coverage.worth_exploring(env) for env in coverage.tools}
        size, looked = min(settings.batch_episodes, len(live)), 0
        while len(batch) < size and looked < len(live):  # each scenario at most once a batch
            ref = live[cursor % len(live)]
            cursor += 1
            looked += 1
            if not worth[ref.env.env_id]:
                continue  # every tool plateaued, and nothing it reaches is still short
            episode = rounds[ref.task_id]
            rounds[ref.task_id] += 1
            failure_short = bool(failure_keys & set(coverage.short()))
            policy = PolicySettings(
                seed=random.Random(f"{settings.seed}:{ref.task_id}:{episode}").randrange(2**31),
                episode_length=settings.episode_length,
                mutate_rate=min(0.5, settings.mutate_rate * (2 if failure_short else 1)),
                max_batch=settings.max_batch,
                tool_weights=coverage.tool_weights(ref.env.env_id, env_tools[ref.env.env_id]),
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
        if not batch:
            break  # no environment can help any target still short (satisfied() says so too)
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
                Action(
                    s["tool"],
                    json.loads(s["arguments_json"]),
                    turn=s["step_index"],
                    mutated_arg=s.get("mutated_arg"),
                    observed_after_hash=s.get("state_after_hash"),
                )
                for s in result["steps"]
            )
            yield replace(traj, actions=actions, meta={}), result
        if dead:
            live = [s for s in live if s.task_id not in dead]
            left = {s.env.env_id for s in live}
            coverage.explore_envs({env: tools for env, tools in env_tools.items() if env in left})
    short = sorted(coverage.short())
    unreachable = coverage.unreachable_lines()
    if not short:
        why = "every reachable coverage target met" if unreachable else "every coverage target met"
    elif not env_tools:
        why = "no scenario to explore; short: " + ", ".join(short)
    elif coverage.steps >= budget:
        why = f"call budget spent ({settings.budget_text(len(env_tools))}); short: " + ", ".join(short)
    else:
        why = "no scenario left to explore; short: " + ", ".join(short)
    coverage.stop_reason = "; ".join([why, *unreachable])
    progress.finish(coverage.stop_reason)
