"""Which environments and tasks feed a run: bfcl-eval tasks, the builtin pack, EnvScaler corpora."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from pipeline.collect.explore import ScenarioRef
from pipeline.collect.replay import bfcl_env_spec, ground_truth_trajectories
from pipeline.collect.trajectory import Trajectory
from pipeline.envs import builtin, envscaler
from pipeline.envs.bfcl_tasks import BfclTaskFile, TaskIssue, default_task_files, iter_tasks

if TYPE_CHECKING:
    from pipeline.collect.agent import AgentTask


@dataclass(frozen=True)
class EnvScalerCorpus:
    """A user corpus in EnvScaler's format: env items + scenario items."""

    env_items: Path
    scenarios: Path | None = None
    prefix: str = envscaler.SOURCE
    license: str = ""
    more_scenarios: tuple[Path, ...] = ()  # further scenario files (the Hub release: RL and SFT scenarios)

    def scenario_files(self) -> list[Path]:
        return ([self.scenarios] if self.scenarios is not None else []) + list(self.more_scenarios)


@dataclass(frozen=True)
class SourceConfig:
    bfcl_files: list[BfclTaskFile] = field(default_factory=default_task_files)
    bfcl_replay: bool = True
    bfcl_explore: bool = False
    builtin: bool = True
    builtin_scenarios_per_env: int = 300
    builtin_seed: int = 0
    envscaler: list[EnvScalerCorpus] = field(default_factory=list)
    message_histories: list[Path] = field(default_factory=list)  # JSON lines of OpenAI message histories
    explore_class_defaults: bool = True  # corpus environments without a scenario: explore cls({}) / cls()


def env_items(cfg: SourceConfig) -> tuple[list[envscaler.EnvItem], list[TaskIssue]]:
    """Every usable EnvScaler-format environment (builtin pack + corpora), and the bad ones."""
    items: list[envscaler.EnvItem] = builtin.parsed_items() if cfg.builtin else []
    issues: list[TaskIssue] = []
    for corpus in cfg.envscaler:
        for result in envscaler.load_env_items(corpus.env_items, corpus.prefix, corpus.license):
            item, problems = envscaler.split_item(result)
            issues.extend(problems)
            if item is not None:
                items.append(item)
    return items, issues


def replay_trajectories(cfg: SourceConfig) -> Iterator[Trajectory | TaskIssue]:
    if cfg.bfcl_replay and cfg.bfcl_files:
        yield from ground_truth_trajectories(iter_tasks(cfg.bfcl_files))


def exploration_scenarios(
    cfg: SourceConfig, items: list[envscaler.EnvItem], without: list[str] | None = None
) -> tuple[list[ScenarioRef], list[TaskIssue]]:
    """Scenarios to explore, interleaved across environments so every environment gets episodes.

    Corpus environments that no scenario names are appended to ``without`` (when given) and, with
    ``explore_class_defaults``, explored from their class defaults (init config ``{}``: the
    constructor's own state; a class that cannot be built so is reported as a reset issue)."""
    by_id = {i.qualified_id: i for i in items}
    per_env: dict[str, list[ScenarioRef]] = {}
    issues: list[TaskIssue] = []

    def add(ref: ScenarioRef) -> None:
        per_env.setdefault(ref.env.env_id, []).append(ref)

    if cfg.builtin:
        for sc in builtin.scenarios(cfg.builtin_scenarios_per_env, cfg.builtin_seed):
            item = by_id[f"{builtin.PREFIX}/{sc['env_id']}"]
            add(ScenarioRef(sc["task_id"], item.spec(sc["init_config"]), task=sc["task"]))
    for corpus in cfg.envscaler:
        for path in corpus.scenario_files():
            for sc in envscaler.load_scenarios(path):
                if isinstance(sc, TaskIssue):
                    issues.append(sc)
                    continue
                item = by_id.get(f"{corpus.prefix}/{sc.env_id}")
                if item is None:
                    issues.append(TaskIssue(sc.task_id, "parse", f"unknown or unusable env_id {envscaler.bounded(repr(sc.env_id), 80)}", sc.origin))
                    continue
                add(ScenarioRef(sc.task_id, item.spec(sc.init_config), task=sc.task))
        prefix = f"{corpus.prefix}/"
        for item in items:
            if item.prefix == corpus.prefix and item.qualified_id not in per_env and item.qualified_id.startswith(prefix):
                if without is not None:
                    without.append(item.qualified_id)
                if cfg.explore_class_defaults:
                    add(ScenarioRef(f"{item.env_id}/class-defaults", item.spec({}), category="explore-defaults",
                                    task="Explore the environment from its class defaults."))
    if cfg.bfcl_explore:
        for task in iter_tasks(cfg.bfcl_files):
            if not isinstance(task, TaskIssue):
                add(ScenarioRef(f"{task.task_id}", bfcl_env_spec(task), task="\n".join(task.turns)))
    queues = list(per_env.values())
    interleaved = [q[i] for i in range(max(map(len, queues), default=0)) for q in queues if i < len(q)]
    return interleaved, issues


def agent_tasks(cfg: SourceConfig, items: list[envscaler.EnvItem], sources: list[str], limit: int | None) -> list[AgentTask]:
    """Tasks for the agent policy from the chosen sources ("builtin", "envscaler", "bfcl"), interleaved."""
    from pipeline.collect.agent import AgentTask

    per_source: dict[str, list[AgentTask]] = {}
    if "builtin" in sources or "envscaler" in sources:
        scenarios, _ = exploration_scenarios(
            SourceConfig(bfcl_files=[], bfcl_replay=False, builtin=cfg.builtin and "builtin" in sources,
                         builtin_scenarios_per_env=cfg.builtin_scenarios_per_env, builtin_seed=cfg.builtin_seed,
                         envscaler=cfg.envscaler if "envscaler" in sources else []),
            items,
        )
        for ref in scenarios:
            per_source.setdefault(ref.env.env_id.split("/")[0], []).append(AgentTask(ref.task_id, ref.env, [ref.task or "Complete the task."]))
    if "bfcl" in sources:
        for task in iter_tasks(cfg.bfcl_files):
            if not isinstance(task, TaskIssue):
                per_source.setdefault("bfcl", []).append(
                    AgentTask(task.task_id, bfcl_env_spec(task), [t or "Continue." for t in task.turns] or ["Complete the task."]))
    queues = list(per_source.values())
    tasks = [q[i] for i in range(max(map(len, queues), default=0)) for q in queues if i < len(q)]
    return tasks[:limit] if limit else tasks


def history_trajectories(cfg: SourceConfig, items: list[envscaler.EnvItem]) -> Iterator[Trajectory | TaskIssue]:
    """Replay source: recorded OpenAI message histories (this pipeline's ``data/agent/*.jsonl`` or any
    tool's), one JSON object per line with ``task_id``, ``messages`` and either ``env`` (an env spec as
    recorded here) or ``env_id`` (+ ``init_config``) naming a catalogued EnvScaler/builtin environment.
    Their tool calls are re-executed through the labeling core; no model is needed."""
    from pipeline.collect.agent import actions_from_messages
    from pipeline.envs.protocol import EnvSpec

    by_id = {i.qualified_id: i for i in items} | {i.env_id: i for i in items}
    for path in cfg.message_histories:
        with Path(path).open(encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                origin = f"{Path(path).name}:{lineno}"
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                    task_id = str(row["task_id"])
                    messages = row["messages"]
                except (ValueError, KeyError, TypeError) as exc:
                    yield TaskIssue(origin, "parse", f"not a message-history record: {exc}", origin)
                    continue
                if isinstance(row.get("env"), dict):
                    env = EnvSpec(**row["env"])
                elif row.get("env_id") in by_id:
                    env = by_id[row["env_id"]].spec(row.get("init_config") or {})
                else:
                    yield TaskIssue(task_id, "parse", f"unknown environment {row.get('env_id')!r}", origin)
                    continue
                actions, malformed = actions_from_messages(messages)
                for bad in malformed:
                    yield TaskIssue(task_id, "collect", f"tool call {bad['tool']!r} not replayed: {bad['reason']}", origin)
                yield Trajectory(f"{env.env_id}/{task_id}/history-{Path(path).stem}", task_id, env, tuple(actions),
                                 category="history", strategy="replay-messages", meta={"messages": messages})
