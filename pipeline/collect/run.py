"""The collection stage end to end: catalog items, ground-truth replay and exploration."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Callable

from pipeline.collect.collector import CollectReport, collect
from pipeline.collect.explore import Coverage, ExploreSettings, explore
from pipeline.collect.sources import SourceConfig, env_items, exploration_scenarios, replay_trajectories
from pipeline.envs import registry
from pipeline.envs.protocol import EnvSpec
from pipeline.execution.sandbox import Sandbox
from pipeline.store.layout import DataLayout

Log = Callable[[str], None]


@dataclass
class CollectionResult:
    report: CollectReport
    coverage: Coverage | None


def _tool_names(spec: EnvSpec) -> list[str]:
    return [t["function"]["name"] for t in registry.static(spec).tools]


def collect_all(
    cfg: SourceConfig,
    layout: DataLayout,
    sandbox: Sandbox,
    explore_settings: ExploreSettings | None = None,
    log: Log = lambda _m: None,
) -> CollectionResult:
    """Replay ground truth (bfcl) and explore scenarios (builtin pack, EnvScaler corpora, optionally
    bfcl) into one trajectories table."""
    items, item_issues = env_items(cfg)
    streams = [iter(item_issues), replay_trajectories(cfg)]
    coverage = None
    if explore_settings is not None:
        scenarios, scenario_issues = exploration_scenarios(cfg, items)
        coverage = Coverage(explore_settings)
        streams += [iter(scenario_issues), explore(scenarios, _tool_names, sandbox, explore_settings, coverage, log)]
    report = collect(itertools.chain(*streams), layout, sandbox, log)
    return CollectionResult(report, coverage)
