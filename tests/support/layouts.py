"""Data layouts the test modules build for themselves (each in a module-scoped fixture of its own, so
every module gets its own copy to change): builtin environments collected, and a benchmark split of the
session's default layout with the right answer of each prompt."""

import shutil

import pandas as pd

from pipeline.collect.explore import ExploreSettings
from pipeline.collect.run import collect_all
from pipeline.collect.sources import SourceConfig, env_items
from pipeline.core.protocol import answer, messages
from pipeline.envs.catalog import build_catalog
from pipeline.envs.registry import sources_config
from pipeline.select.selection import build_benchmark
from pipeline.select.stratify import stratify
from pipeline.store.layout import DataLayout


def collected_builtin(root, sandbox, scenarios_per_env: int, call_budget: int, batch_episodes: int) -> DataLayout:
    """The builtin environments (no bfcl replay) in a catalog at ``root``, explored within ``call_budget``."""
    layout = DataLayout.at(root)
    cfg = sources_config(bfcl={"replay": False}, builtin={"scenarios_per_env": scenarios_per_env})
    items, issues = env_items(cfg)
    build_catalog(layout, items, issues)
    collect_all(cfg, layout, sandbox, ExploreSettings(call_budget=call_budget, batch_episodes=batch_episodes))
    return layout


def stratified_copy(default_layout: DataLayout, root) -> DataLayout:
    """A copy of the session's default layout at ``root`` with its strata table built."""
    layout = DataLayout.at(root)
    shutil.copytree(default_layout.root, layout.root)
    stratify(layout)
    return layout


def benchmark_split(default_layout: DataLayout, root):
    """A copy of the default layout at ``root`` with a benchmark split (seed 0): ``(layout, version,
    samples, answers)``, ``answers`` mapping each sample's user prompt to the executor's answer."""
    layout = stratified_copy(default_layout, root)
    bench = build_benchmark(layout, seed=0, on_shortfall="warn")
    samples = pd.read_parquet(bench.path).to_dict("records")
    answers = {messages(s)[1]["content"]: answer(s) for s in samples}
    return layout, bench.version, samples, answers
