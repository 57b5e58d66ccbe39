"""Which environments and tasks feed a run: bfcl-eval tasks, the builtin pack, EnvScaler corpora."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from pipeline.collect.explore import ScenarioRef
from pipeline.collect.replay import bfcl_env_spec, ground_truth_trajectories
from pipeline.collect.trajectory import Trajectory
from pipeline.envs import builtin, envscaler
from pipeline.envs.bfcl_tasks import BfclTaskFile, TaskIssue, default_task_files, iter_tasks


@dataclass(frozen=True)
class EnvScalerCorpus:
    """A user corpus in EnvScaler's format: env items + scenario items."""

    env_items: Path
    scenarios: Path | None = None
    prefix: str = envscaler.SOURCE
    license: str = ""


@dataclass(frozen=True)
class SourceConfig:
    bfcl_files: list[BfclTaskFile] = field(default_factory=default_task_files)
    bfcl_replay: bool = True
    bfcl_explore: bool = False
    builtin: bool = True
    builtin_scenarios_per_env: int = 300
    builtin_seed: int = 0
    envscaler: list[EnvScalerCorpus] = field(default_factory=list)


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


def exploration_scenarios(cfg: SourceConfig, items: list[envscaler.EnvItem]) -> tuple[list[ScenarioRef], list[TaskIssue]]:
    """Scenarios to explore, interleaved across environments so every environment gets episodes."""
    by_id = {i.qualified_id: i for i in items}
    per_env: dict[str, list[ScenarioRef]] = {}
    issues: list[TaskIssue] = []

    def add(ref: ScenarioRef) -> None:
        per_env.setdefault(ref.env.env_id, []).append(ref)

    if cfg.builtin:
        for sc in builtin.scenarios(cfg.builtin_scenarios_per_env, cfg.builtin_seed):
            item = by_id[f"{builtin.PREFIX}/{sc['env_id']}"]
            add(ScenarioRef(sc["task_id"], item.spec(sc["init_config"])))
    for corpus in cfg.envscaler:
        if corpus.scenarios is None:
            continue
        for sc in envscaler.load_scenarios(corpus.scenarios):
            if isinstance(sc, TaskIssue):
                issues.append(sc)
                continue
            item = by_id.get(f"{corpus.prefix}/{sc.env_id}")
            if item is None:
                issues.append(TaskIssue(sc.task_id, "parse", f"unknown or unusable env_id {sc.env_id!r}", sc.origin))
                continue
            add(ScenarioRef(sc.task_id, item.spec(sc.init_config)))
    if cfg.bfcl_explore:
        for task in iter_tasks(cfg.bfcl_files):
            if not isinstance(task, TaskIssue):
                add(ScenarioRef(f"{task.task_id}", bfcl_env_spec(task)))
    queues = list(per_env.values())
    interleaved = [q[i] for i in range(max(map(len, queues), default=0)) for q in queues if i < len(q)]
    return interleaved, issues
