"""Stratum-targeted exploration: seeded policy episodes over scenarios until every cell of the benchmark
composition (and every Balance2 group) has enough candidate steps or cannot get them, or the call budget
(:meth:`ExploreSettings.budget`) is spent (docs/environments.md, "Exploration adapts to the corpus").

:class:`Coverage` keeps per (environment, tool) the strata its calls produced and what each tool has *shown*
(:class:`ToolShown`): episodes weight tools by the short cells they hit; a tool that showed nothing new for
``plateau_calls`` calls has plateaued; a target no explored environment can approach is unreachable; at the stop
each target still short gets a verdict (:meth:`Coverage.judge`). Seeds and refusals pass between batches
(:mod:`pipeline.collect.seeds`). Every decision follows the steps seen in input order: same seed, same trajectories.
"""

from __future__ import annotations

import json
import random
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from pipeline.collect.seeds import Teacher
from pipeline.core.axes import ARGS, DELTA, OUTCOME, OneOf, Range, When, axis_values
from pipeline.core.environment import EnvSpec
from pipeline.core.fields import same_as, setting
from pipeline.core.issues import TaskIssue
from pipeline.core.outcome import FAILURE, SUCCESS
from pipeline.core.profile import RunPolicy
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
        "Stop after this many tool calls (unset: the budget follows the corpus and the progress: the largest of "
        "`calls_per_environment` × environments, `calls_per_scenario` × scenarios and `calls_per_tool` × tools, "
        "extended while calls still find something new, at most `max_call_budget`).",
    )
    max_call_budget: int = setting(
        RunPolicy().explore_call_budget,
        "The largest budget an unset `call_budget` scales to (default: the `default` "
        "profile's `explore_call_budget`; the `run_policy` resource passes the profile's).",
    )
    calls_per_environment: int = setting(3_000, "Tool calls per explored environment an unset `call_budget` allows.")
    calls_per_scenario: int = setting(200, "Tool calls per explored scenario an unset `call_budget` allows.")
    calls_per_tool: int = setting(
        300, "Tool calls per tool of the explored environments an unset `call_budget` allows."
    )
    progress_calls: int = setting(
        2_000,
        "An unset `call_budget` spent while a call of the last this many reached something new (a new (outcome, "
        "|Δ|, argument count) of its tool, a candidate of a benchmark cell short of candidates) grows by this many "
        "calls, up to `max_call_budget`.",
    )
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

    def _scaled(self, environments: int, scenarios: int, tools: int) -> tuple[int, str]:
        """The largest of the three corpus-scaled budgets (the first of equal ones), and its terms in words."""
        counts = (("environment", environments), ("scenario", scenarios), ("tool", tools))
        each, n, word = max(((getattr(self, f"calls_per_{w}"), n, w) for w, n in counts), key=lambda t: t[0] * t[1])
        return each * n, f"calls_per_{word} {each:,} × {n} {word}{'s' * (n != 1)}"

    def budget(self, environments: int, scenarios: int = 0, tools: int = 0) -> int:
        """The starting call budget for the corpus explored: ``call_budget`` when set, else the largest of
        ``calls_per_environment`` × environments, ``calls_per_scenario`` × scenarios and ``calls_per_tool`` ×
        tools, at most ``max_call_budget`` (:func:`explore` extends it while calls find something new)."""
        if self.call_budget is not None:
            return self.call_budget
        return min(self.max_call_budget, self._scaled(environments, scenarios, tools)[0])

    def budget_text(self, environments: int, scenarios: int = 0, tools: int = 0, spent: int | None = None) -> str:
        """Where the budget comes from, in words, with the values in force (``spent``: the budget as extended)."""
        if self.call_budget is not None:
            return f"{self.call_budget:,} calls (call_budget)"
        scaled, text = self._scaled(environments, scenarios, tools)
        budget = min(self.max_call_budget, scaled)
        if spent is not None and spent > budget:
            cap = f", up to max_call_budget {self.max_call_budget:,}" if spent >= self.max_call_budget else ""
            return f"{spent:,} calls: {text} = {scaled:,}, extended while calls found something new{cap}"
        cap = f" = {scaled:,}, capped at max_call_budget {self.max_call_budget:,}" if scaled > budget else ""
        return f"{budget:,} calls: {text}{cap}"

    def budget_setting(self, environments: int, scenarios: int = 0, tools: int = 0, spent: int | None = None) -> str:
        """The one setting to raise to explore longer, with its value in force."""
        if self.call_budget is not None:
            return f"`ops: trajectories: config: call_budget` (now {self.call_budget:,})"
        if spent is not None and spent >= self.max_call_budget:
            return (
                f"the profile's `explore_call_budget` (now {self.max_call_budget:,}: `resources: run_policy: config: "
                "explore_call_budget`), or set `ops: trajectories: config: call_budget`"
            )
        _, text = self._scaled(environments, scenarios, tools)
        name, value = text.split(" ")[:2]
        return f"`ops: trajectories: config: {name}` (now {value}), or set `call_budget`"


@dataclass(frozen=True)
class ScenarioRef:
    """A scenario to explore: an environment spec plus the task it belongs to."""

    task_id: str
    env: EnvSpec
    category: str = "explore"
    task: str = ""  # the natural-language task (for agents)
    reference: tuple[tuple[str, dict[str, Any]], ...] = ()  # reference (gold) calls: replayed before exploration
    relational: bool = True  # its source's: the relational policy and a budget that follows progress, else the plain


def reference_trajectories(scenarios: Iterable[ScenarioRef]) -> Iterator[Trajectory]:
    """A trajectory of each scenario's reference calls (``reference_actions`` / ``gold_actions`` / ``actions``
    of an EnvScaler-format scenario item), replayed like bfcl's ground truth: strategy and category
    ``reference``."""
    for ref in scenarios:
        if ref.reference:
            actions = tuple(Action(name, dict(args), turn=0) for name, args in ref.reference)
            trajectory_id = f"{ref.env.env_id}/{ref.task_id}/reference"
            yield Trajectory(trajectory_id, ref.task_id, ref.env, actions, "reference", "reference")


@dataclass
class ToolShown:
    """What one tool of one environment has shown so far: the (outcome, |Δ|, argument count) of its calls
    (|Δ| capped where no target tells values apart), its largest |Δ|, and how many calls ago it last showed
    something new (``quiet``)."""

    calls: int = 0
    max_delta: int = 0
    seen: set[tuple[str, int, int]] = field(default_factory=set)
    quiet: int = 0

    def see(self, outcome: str, delta: int, args: int, horizon: int) -> bool:
        """Count one call; whether it showed something new."""
        point = (outcome, min(delta, horizon), args)
        self.calls += 1
        self.max_delta = max(self.max_delta, delta)
        new = point not in self.seen
        self.quiet = 0 if new else self.quiet + 1
        self.seen.add(point)
        return new

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
    if isinstance(outcome := cond.get(OUTCOME.column), OneOf) and outcome.values != (SUCCESS,):
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
    composition: Composition = field(default_factory=Composition)
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
    #: the step count at the last call that reached something new (:meth:`add`)
    last_new: int = 0
    #: per target still short when exploration stopped: why (``unreachable, …``, ``budget: …``, ``environments: …``)
    verdicts: dict[str, str] = field(default_factory=dict)
    #: the budget in force, in words, and the setting that explores longer with its value (set by :func:`explore`)
    budget_text: str = ""
    budget_setting: str = ""
    #: whether exploration stopped with its budget spent (set by :func:`explore`)
    spent: bool = False
    #: the (outcome, |Δ|, argument count) of the steps that were not explored — reference and replayed calls
    #: (:meth:`observe`): what "seen" counts beside exploration's own steps; never steers exploration
    observed: set[tuple[str, int, int]] = field(default_factory=set)
    _version: int = field(default=0, repr=False, compare=False)
    _cache: dict[Any, Any] = field(default_factory=dict, repr=False, compare=False)

    def targets(self) -> dict[str, int]:
        out = {c.name: int(c.quota * self.settings.cell_factor) for c in self.composition.cells}
        out.update({f"b2:{g}": int(n * self.settings.group_factor) for g, n in self.composition.mixture_sizes.items()})
        return out

    def add(self, env_id: str, tool: str, *values: Any, short: Iterable[str] = (), **named: Any) -> bool:
        """Count one step of ``env_id`` calling ``tool``: its axis values, a mapping keyed by column (a step
        record; :func:`~pipeline.core.axes.axis_values`). Whether it reached something new: a new (outcome,
        |Δ|, argument count) of its tool, or a candidate of a target in ``short``."""
        step = axis_values(*values, **named)
        self.steps += 1
        self._version += 1
        hits = self.tool_hits[(env_id, tool)]
        hits["_calls"] += 1
        new = self.shown[(env_id, tool)].see(
            step[OUTCOME.column], int(step[DELTA.column]), int(step[ARGS.column]), self._delta_horizon
        )
        for cell in self.composition.cells_of(step):
            self.cells[cell] += 1
            self.cell_envs[cell].add(env_id)
            hits[cell] += 1
            new = new or cell in short
        if group := RULES.balance2_group.label(step):
            self.groups[group] += 1
            hits[f"b2:{group}"] += 1
            new = new or f"b2:{group}" in short
        if new:
            self.last_new = self.steps
        return new

    def observe(self, step: Mapping[str, Any]) -> None:
        """Count a step that exploration did not make (a reference or replayed call) in what has been seen."""
        point = axis_values(step)
        self.observed.add((point[OUTCOME.column], int(point[DELTA.column]), int(point[ARGS.column])))
        self._version += 1

    def rejudge(self) -> None:
        """The verdicts again, with every step observed since :func:`explore` judged (:meth:`judge`)."""
        if self.verdicts:
            self.verdicts = self.judge(self.spent, self.budget_text, self.budget_setting)

    def plateaued(self) -> bool:
        """Whether the last ``progress_calls`` calls reached nothing new: more calls of the same search would not."""
        return self.steps > 0 and self.steps - self.last_new >= self.settings.progress_calls

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

    def describe(self, key: str) -> str:
        """A target and its rule: ``difficult (|Δ| 7–12)``."""
        text = _predicate_text(self._rule(key))
        return f"{key} ({text})" if text else key

    @cached_property
    def _delta_horizon(self) -> int:
        """|Δ| from which no target rule tells two values apart (above every finite bound)."""
        whens = [c.when for c in self.composition.cells] + [r.when for r in RULES.balance2_group.rules]
        conds = [cond for when in whens for column, cond in when.conditions if column == DELTA.column]
        return max([0, *(c.lo if c.hi is None else c.hi for c in conds if isinstance(c, Range))]) + 1

    def _point_matches(self, key: str, point: tuple[str, int, int]) -> bool:
        """Whether a step of (outcome, |Δ|, argument count) ``point`` counts toward the target ``key``."""
        step = dict(zip((OUTCOME.column, DELTA.column, ARGS.column), point))
        if key.startswith("b2:"):
            return RULES.balance2_group.label(step) == key[3:]
        return self._rule(key).matches(step)

    def _tool_reaches(self, shown: ToolShown) -> frozenset[str]:
        """The targets a plateaued tool reaches: those a step it has shown qualifies for."""
        memo = self._cache.setdefault("tools", {})
        key = frozenset(shown.seen)
        if key not in memo:
            memo[key] = frozenset(t for t in self.targets() if any(self._point_matches(t, p) for p in key))
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
        deficit = max(0.0, (target - self.count(key)) / target) if target else 0.0
        return deficit, not key.startswith("b2:") and len(self.cell_envs.get(key, ())) < self.settings.min_envs

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
            reach = "environment reaches" if environments == 1 else "environments reach"
            return (
                f"too few environments: {environments} {reach} it, the target wants {self.settings.min_envs} "
                "(every environment that reaches it has contributed)"
            )
        seen = {point for s in self.shown.values() if s.calls for point in s.seen} | self.observed
        cond = dict(self._rule(key).conditions)
        delta, outcome, args = cond.get(DELTA.column), cond.get(OUTCOME.column), cond.get(ARGS.column)
        top = self._top_delta()
        elsewhere = sum(1 for point in self.observed if self._point_matches(key, point))
        if elsewhere:  # a reference or replayed step reached it: exploration did not, though the corpus can
            return (
                f"not reached by exploration, whose tools plateaued (reached only by reference or replayed steps), "
                f"|Δ| seen: {_values_text((d for _, d, _ in seen), self._delta_horizon)}"
            )
        if isinstance(delta, Range) and top < delta.lo:
            return f"unreachable, max |Δ| seen {top}"
        if isinstance(outcome, OneOf) and not any(o in outcome.values for o, _, _ in seen):
            return f"unreachable, no {'/'.join(outcome.values)} step seen"
        if isinstance(args, Range) and not any(args.matches(a) for _, _, a in seen):
            return f"unreachable, argument counts seen: {_values_text(a for _, _, a in seen)}"
        return f"unreachable, |Δ| seen: {_values_text((d for _, d, _ in seen), self._delta_horizon)}"

    def judge(self, spent: bool, budget_text: str, setting: str) -> dict[str, str]:
        """Why each target still short is short — one of three statements, never confused:

        * ``unreachable, max |Δ| seen N`` (or no step of its outcome / argument count): every tool that could
          approach it has plateaued below it;
        * ``not reached within the budget (…): still finding something new: env: tool, …; raise <setting> (now
          <value>)``: the budget ran out while tools of an environment that may reach it had not plateaued;
        * ``plateaued: the last N calls found nothing new …; never succeeded: env: tool, …; max |Δ| seen M``: the
          budget ran out, or could not grow, while the search had stopped finding anything (:meth:`plateaued`) —
          more calls of the same search would not help, so no setting to raise is named;
        * ``too few environments: K environments reach it, the target wants 10``.

        (``not reached: no scenario left to explore`` when exploration ended for want of scenarios.)"""
        out: dict[str, str] = {}
        unreachable = self.unreachable()
        for key, target in self.targets().items():
            deficit, few_envs = self._deficits(key, target)
            if not deficit and not few_envs:
                continue
            if key in unreachable:
                out[key] = unreachable[key]
                continue
            if not spent:
                out[key] = "not reached: no scenario left to explore"
                continue
            if self.plateaued():
                out[key] = self._plateau_text()
                continue
            finding = []
            for env, tools in self.tools.items():
                reached = self.reaches(env)
                if reached is not None and key not in reached:
                    continue
                for tool in tools:
                    shown = self.shown.get((env, tool))
                    if shown is None or not shown.plateaued(self.settings.plateau_calls):
                        finding.append((shown.quiet if shown else 0, f"{env}: {tool}"))
            names = [name for _, name in sorted(finding)]
            more = f" (+{len(names) - 4} more)" if len(names) > 4 else ""
            out[key] = (
                f"not reached within the budget ({budget_text}): still finding something new: "
                f"{', '.join(names[:4]) or 'none'}{more}; raise {setting}"
            )
        return out

    def _plateau_text(self) -> str:
        """What a plateaued search never reached: the tools that never succeeded, the largest |Δ| seen."""
        never = sorted(
            f"{env}: {tool}"
            for env, tools in self.tools.items()
            for tool in tools
            if not any(o == SUCCESS for o, _, _ in getattr(self.shown.get((env, tool)), "seen", ()))
        )
        more = f" (+{len(never) - 4} more)" if len(never) > 4 else ""
        return (
            f"plateaued: the last {self.steps - self.last_new:,} calls found nothing new, so more calls of the same "
            f"search would not help; never succeeded: {', '.join(never[:4]) or 'none'}{more}; "
            f"max |Δ| seen {self._top_delta()}"
        )

    def _top_delta(self) -> int:
        """The largest |Δ| seen: of a tool's calls, or of an observed step."""
        return max(
            [*(s.max_delta for s in self.shown.values() if s.calls), *(d for _, d, _ in self.observed)], default=0
        )

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
            weights[tool] = 0.05 + 4.0 * sum(deficit * hits[key] / calls for key, deficit in short.items())
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
    # a corpus only of plain sources (the builtin pack) keeps the plain budget: calls_per_environment × environments,
    # never extended, batches of whole episodes
    plain = not any(s.relational for s in scenarios)
    corpus = (
        (len(env_tools), 0, 0)
        if plain
        else (len(env_tools), len({s.task_id for s in scenarios}), sum(map(len, env_tools.values())))
    )
    budget = coverage.call_budget = settings.budget(*corpus)
    grows = not plain and settings.call_budget is None  # an unset budget grows while calls find something new
    # failure cells (and the Balance2 failure group) short: mutate more
    failure_keys = {c.name for c in coverage.composition.cells if c.outcome == FAILURE} | {f"b2:{FAILURE}"}
    targets = len(coverage.targets())
    teacher = Teacher()

    def detail() -> str:
        unreachable = len(coverage.unreachable())
        met = targets - len(coverage.short()) - unreachable
        return f"{met}/{targets} coverage targets met" + (f", {unreachable} unreachable" if unreachable else "")

    def extend() -> bool:
        """An unset budget spent while calls still reach something new grows (up to the profile's cap)."""
        nonlocal budget
        if not grows or budget >= settings.max_call_budget:
            return False
        if coverage.steps - coverage.last_new >= settings.progress_calls:
            return False
        budget = coverage.call_budget = min(settings.max_call_budget, budget + settings.progress_calls)
        progress.total = budget
        return True

    # the total is the call budget (known up front, grown while calls find something new; no batch runs past
    # it); exploration stops earlier when every coverage target is met or unreachable
    progress = Progress(
        "exploration",
        budget,
        log,
        unit="calls",
        finish_at_total=False,
        detail=detail,
        ceiling=settings.max_call_budget if grows else None,
    )
    progress.advance(min(coverage.steps, budget))  # a coverage carried in from earlier
    live = list(scenarios)
    rounds: Counter[str] = Counter()
    cursor = 0
    while live and not coverage.satisfied() and (coverage.steps < budget or extend()):
        batch = []
        worth = {env: coverage.worth_exploring(env) for env in coverage.tools}
        size, looked, planned = min(settings.batch_episodes, len(live)), 0, 0
        short_now = set(coverage.short())
        failure_short = bool(failure_keys & short_now)
        # progress (which grows an unset budget): a tool showing something new, or a candidate of a benchmark cell
        # short of candidates; a Balance2 group (thousands of samples) or a cell short only of environments is not
        wanted = coverage.targets()
        short_now = {key for key in short_now if not key.startswith("b2:") and coverage.count(key) < wanted[key]}
        while len(batch) < size and looked < len(live) and (plain or planned < budget - coverage.steps):
            ref = live[cursor % len(live)]  # each scenario at most once a batch
            cursor += 1
            looked += 1
            if not worth[ref.env.env_id]:
                continue  # every tool plateaued, and nothing it reaches is still short
            episode = rounds[ref.task_id]
            rounds[ref.task_id] += 1
            length = settings.episode_length
            if not plain:  # no batch runs past the budget
                length = min(length, budget - coverage.steps - planned)
            planned += length
            policy = PolicySettings(
                seed=random.Random(f"{settings.seed}:{ref.task_id}:{episode}").randrange(2**31),
                episode_length=length,
                mutate_rate=min(0.5, settings.mutate_rate * (2 if failure_short else 1)),
                max_batch=settings.max_batch,
                tool_weights=coverage.tool_weights(ref.env.env_id, env_tools[ref.env.env_id]),
                relational=ref.relational,
            )
            if ref.relational:  # what earlier calls reached and what refusals said, passed on
                seeds, refusals = teacher.for_scenario(ref.task_id, env_tools[ref.env.env_id])
                policy = replace(policy, seeds=seeds, refusals=refusals)
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
                new = coverage.add(traj.env_id, step["tool"], step, short=short_now)
                if traj.meta["explore"].relational:
                    teacher.learn(traj.env_id, traj.task_id, step, new)
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
    spent = coverage.spent = coverage.steps >= budget
    coverage.budget_text = settings.budget_text(*corpus, spent=budget)
    coverage.budget_setting = settings.budget_setting(*corpus, spent=budget)
    coverage.verdicts = coverage.judge(spent, coverage.budget_text, coverage.budget_setting)
    if not short:
        why = "every reachable coverage target met" if unreachable else "every coverage target met"
    elif not env_tools:
        why = "no scenario to explore; short: " + ", ".join(short)
    elif spent:
        why = f"call budget spent ({coverage.budget_text}); short: " + ", ".join(short)
    else:
        why = "no scenario left to explore; short: " + ", ".join(short)
    coverage.stop_reason = "; ".join([why, *unreachable])
    progress.finish(coverage.stop_reason)
