"""The collection stage end to end: catalog items, ground-truth replay and exploration."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from pipeline.collect import reuse
from pipeline.collect.agent import collect_agent, episode_trajectory
from pipeline.collect.collector import collect
from pipeline.collect.explore import Coverage, ExploreSettings, explore, reference_trajectories
from pipeline.collect.result import CollectionResult, ShardSummary
from pipeline.collect.sources import (
    SourceConfig,
    agent_tasks,
    env_items,
    exploration_scenarios,
    history_trajectories,
    replay_trajectories,
)
from pipeline.core.environment import EnvSpec
from pipeline.core.fields import setting
from pipeline.core.issues import TaskIssue
from pipeline.core.progress import Log, Progress
from pipeline.core.strata import Composition
from pipeline.core.trajectory import Trajectory
from pipeline.envs import registry
from pipeline.envs.partitions import partition_keys, partitioned_sources
from pipeline.execution.sandbox import Sandbox
from pipeline.models.agent_settings import AgentSettings
from pipeline.store.layout import DataLayout, safe_name
from pipeline.store.partitions import Shard, begin_partitioned, end_unpartitioned

#: the source whose shard 0 reports the issues that name no environment of a shard (an env item that does not
#: compile, a scenario line that is not JSON, a bad message history): the first whose environments no prefix names
PARSE_ISSUES = next(s.name for s in registry.sources() if s.prefix is None and not s.foreign)


def _in_shard(stream: Iterable, shard: Shard, summary: ShardSummary, issues_of: str | None) -> Iterator:
    """The items of ``stream`` that belong to ``shard``: trajectories, explored trajectories (with
    their sandbox result) and scenarios by environment; issues, which name no environment, go to
    shard 0 of the source ``issues_of`` (None: the stream is this shard's already, keep them)."""
    for item in stream:
        if isinstance(item, TaskIssue):
            if issues_of is None or (shard.source == issues_of and shard.is_first):
                yield item
            continue
        env = (item[0] if isinstance(item, tuple) else item).env
        if registry.source_of(env) == shard.source:
            summary.source_envs.add(env.env_id)
            if shard.holds(shard.source, env.env_id):
                summary.shard_envs.add(env.env_id)
                yield item


def _shard_note(summary: ShardSummary, trajectories: int, why_disabled: str | None) -> str:
    s = summary.shard
    envs = (
        f"{len(summary.shard_envs)} of the {len(summary.source_envs)} "
        f"{s.source} environments (shard {s.index} of {s.count})"
    )
    if trajectories:
        return f"partition {s.key}: {envs}, {trajectories} trajectories"
    if not summary.source_envs:
        if why_disabled is not None:
            return f"empty partition {s.key}: {why_disabled}"
        return f"empty partition {s.key}: this configuration collects nothing from {s.source} (e.g. exploration is off)"
    if not summary.shard_envs:
        return (
            f"empty partition {s.key}: none of the {len(summary.source_envs)} {s.source} environments hash to "
            f"shard {s.index} of {s.count}"
        )
    return f"empty partition {s.key}: {envs}, but no trajectory could be collected (see the rejected tasks)"


def _scaled(settings: ExploreSettings, share: float) -> ExploreSettings:
    """Exploration settings for a shard holding ``share`` of the explored environments: its part of
    the call budget (an explicit one, and the most a corpus-scaled one may reach: the scaled budget itself
    counts the shard's own environments) and of the candidate targets, so all shards together explore as
    one run would."""
    return dataclasses.replace(
        settings,
        call_budget=None if settings.call_budget is None else math.ceil(settings.call_budget * share),
        max_call_budget=math.ceil(settings.max_call_budget * share),
        cell_factor=settings.cell_factor * share,
        group_factor=settings.group_factor * share,
        min_envs=max(1, math.ceil(settings.min_envs * share)),
    )


def _tool_names(spec: EnvSpec) -> list[str]:
    return [t["function"]["name"] for t in registry.tool_schemas(spec)]


@dataclass(frozen=True)
class AgentRun:
    """The LLM agent's part of a collection: the agent and the tasks it is given."""

    settings: AgentSettings
    sources: tuple[str, ...] = setting(("builtin",), "Task sources (source names).")
    task_limit: int | None = setting(20, "At most this many tasks (None = all).")


def collect_all(
    cfg: SourceConfig,
    layout: DataLayout,
    sandbox: Sandbox,
    explore_settings: ExploreSettings | None = None,
    log: Log = lambda _m: None,
    agent: AgentRun | None = None,
    shard: Shard | None = None,
    composition: Composition | None = None,
    force: bool = False,
) -> CollectionResult:
    """Replay the sources' ready-made trajectories, explore their scenarios (toward ``composition``, default: the
    profile's) and, with an endpoint configured, let an LLM agent solve tasks — into one trajectories table.

    With ``shard``, only that shard's environments are collected, into the partition's files, with the shard's
    share of the call budget and targets. Unchanged inputs return the recorded result unless ``force``
    (:mod:`pipeline.collect.reuse`)."""
    summary = None
    root = layout.root
    why_disabled = None if shard is None else registry.get(shard.source).why_disabled(cfg)
    if shard is not None:
        layout = layout.for_partition(shard.key)
        for name in begin_partitioned(layout, partition_keys(shard.count)):
            log(f"removed {name} (written under another partitioning)")
        summary = ShardSummary(shard)
    input_key = reuse.fingerprint(cfg, sandbox, explore_settings, composition, shard, agent, root)
    if not force and (kept := reuse.reused(layout, input_key, shard, composition, log)) is not None:
        if shard is None:
            for name in end_unpartitioned(layout):
                log(f"removed {name} (a partitioned collection's file; this collection is unpartitioned)")
        return kept

    def of_shard(stream: Iterable, issues_of: str | None) -> Iterable:
        """``stream``'s items of this collection's shard (unpartitioned: all of them)."""
        return stream if shard is None else _in_shard(stream, shard, summary, issues_of)

    items, item_issues = env_items(cfg)
    # progress of the replays, with their totals known up front: a source's ready-made trajectories (bfcl's
    # tasks: a few thousand at most, package data) are read now; message histories, which can be large,
    # are read once to count them
    # a foreign source's trajectories (served episodes) go to their environments' partitions, its issues to the first
    owners = partitioned_sources()
    replays = [
        list(of_shard(replay_trajectories(cfg, only=name), name if name in owners else owners[0]))
        for name in registry.names()
        if shard is None or shard.source == name or name not in owners
    ]
    replay = [t for r in replays for t in r]
    phases: dict[str, Progress] = {}
    if gt_total := sum(isinstance(t, Trajectory) for t in replay):
        phases["ground_truth"] = Progress(
            " + ".join(sorted({registry.source_of(t.env) for t in replay if isinstance(t, Trajectory)})) + " replay",
            gt_total,
            log,
            unit="trajectories",
        )
    if cfg.message_histories:
        history_total = sum(isinstance(t, Trajectory) for t in of_shard(history_trajectories(cfg, items), PARSE_ISSUES))
        if history_total:
            phases["replay-messages"] = Progress("message-history replay", history_total, log, unit="trajectories")
    streams = [of_shard(item_issues, PARSE_ISSUES), replay, of_shard(history_trajectories(cfg, items), PARSE_ISSUES)]
    agent_rows: list[dict] = []
    if agent is not None:
        tasks = agent_tasks(cfg, items, list(agent.sources), agent.task_limit)
        name = safe_name(agent.settings.model.replace("/", "_"), "agent model name")
        if shard is not None:  # one record per partition: partitions run concurrently
            tasks = [t for t in tasks if shard.holds(registry.source_of(t.env), t.env.env_id)]
            name = f"{name}.{shard.key}"
        agent_rows = asyncio.run(collect_agent(tasks, agent.settings, sandbox, layout.agent_record(name), log))
        streams.append(
            of_shard(
                [  # tasks were chosen per shard already: their issues are this shard's
                    episode_trajectory(r, agent.settings.model)
                    if r["status"] != "reset_error"
                    else TaskIssue(r["task_id"], "reset", "; ".join(e.get("reason", "") for e in r["events"]), "agent")
                    for r in agent_rows
                ],
                None,
            )
        )
    coverage = None
    without: list[str] = []
    explored_without: list[str] = []  # of ``without``, those explored all the same (from their class defaults)
    if explore_settings is not None:
        scenarios, scenario_issues = exploration_scenarios(cfg, items, without)
        if shard is not None:
            adapter_of = {i.qualified_id: i.adapter for i in items}
            without = [e for e in without if shard.holds(registry.source_of_id(adapter_of[e], e), e)]
            everywhere = {s.env.env_id for s in scenarios}
            scenarios = list(of_shard(scenarios, PARSE_ISSUES))
            here = {s.env.env_id for s in scenarios}
            explore_settings = _scaled(explore_settings, len(here) / len(everywhere) if everywhere else 0.0)
        explored = {s.env.env_id for s in scenarios}
        explored_without = [e for e in without if e in explored]
        coverage = Coverage(explore_settings) if composition is None else Coverage(explore_settings, composition)
        streams += [
            of_shard(scenario_issues, PARSE_ISSUES),
            reference_trajectories(scenarios),  # a scenario's reference (gold) calls, replayed first
            explore(scenarios, _tool_names, sandbox, explore_settings, coverage, log),
        ]
    observe = None if coverage is None else coverage.observe
    report = collect(itertools.chain(*streams), layout, sandbox, log, progress=phases, observe=observe)
    if coverage is not None:  # with the reference and replayed steps run after exploration's end
        coverage.rejudge()
    if summary is not None:
        summary.note = _shard_note(summary, report.trajectories, why_disabled)
        log(summary.note)
    result = CollectionResult(report, coverage, agent_rows, summary, without, explored_without)
    reuse.record(layout, input_key, result)
    return result
