"""The collection stage end to end: catalog items, ground-truth replay and exploration."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from pipeline.collect.agent import AgentSettings

from pipeline.collect.collector import CollectReport, collect
from pipeline.collect.explore import Coverage, ExploreSettings, explore
from pipeline.collect.sources import SourceConfig, env_items, exploration_scenarios, history_trajectories, replay_trajectories
from pipeline.envs import registry
from pipeline.envs.bfcl_tasks import TaskIssue
from pipeline.envs.protocol import EnvSpec
from pipeline.execution.sandbox import Sandbox
from pipeline.store.layout import DataLayout

Log = Callable[[str], None]


@dataclass
class CollectionResult:
    report: CollectReport
    coverage: Coverage | None
    agent_episodes: list[dict] = field(default_factory=list)


def _tool_names(spec: EnvSpec) -> list[str]:
    return [t["function"]["name"] for t in registry.static(spec).tools]


@dataclass(frozen=True)
class AgentRun:
    settings: "AgentSettings"
    sources: tuple[str, ...] = ("builtin",)
    task_limit: int | None = 20


def collect_all(
    cfg: SourceConfig,
    layout: DataLayout,
    sandbox: Sandbox,
    explore_settings: ExploreSettings | None = None,
    log: Log = lambda _m: None,
    agent: AgentRun | None = None,
) -> CollectionResult:
    """Replay ground truth (bfcl), explore scenarios (builtin pack, EnvScaler corpora, optionally
    bfcl) and, with an endpoint configured, let an LLM agent solve tasks — into one trajectories table."""
    items, item_issues = env_items(cfg)
    streams = [iter(item_issues), replay_trajectories(cfg), history_trajectories(cfg, items)]
    agent_rows: list[dict] = []
    if agent is not None:
        import asyncio

        from pipeline.collect.agent import collect_agent, episode_trajectory
        from pipeline.collect.sources import agent_tasks

        tasks = agent_tasks(cfg, items, list(agent.sources), agent.task_limit)
        record = layout.root / "agent" / f"{agent.settings.model.replace('/', '_')}.jsonl"
        agent_rows = asyncio.run(collect_agent(tasks, agent.settings, sandbox, record, log))
        streams.append(iter([
            episode_trajectory(r, agent.settings.model) if r["status"] != "reset_error" else
            TaskIssue(r["task_id"], "reset", "; ".join(e.get("reason", "") for e in r["events"]), "agent")
            for r in agent_rows
        ]))
    coverage = None
    if explore_settings is not None:
        scenarios, scenario_issues = exploration_scenarios(cfg, items)
        coverage = Coverage(explore_settings)
        streams += [iter(scenario_issues), explore(scenarios, _tool_names, sandbox, explore_settings, coverage, log)]
    report = collect(itertools.chain(*streams), layout, sandbox, log)
    return CollectionResult(report, coverage, agent_rows)
