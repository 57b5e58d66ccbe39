"""Stage 1: trajectory collection (ground-truth replay + stratum-targeted exploration)."""

import pandas as pd
from dagster import AssetExecutionContext, Config, MaterializeResult, MetadataValue, asset
from pydantic import Field

from pipeline import profile
from pipeline.collect.explore import ExploreSettings
from pipeline.collect.run import collect_all
from pipeline.report import md_records, md_table
from pipeline.strata import BENCHMARK_CELLS
from resources import DataStoreResource, EnvironmentSourcesResource, SandboxResource


class ExplorationConfig(Config):
    """Seeded, schema-driven exploration steered toward strata still short of their quota."""

    enabled: bool = Field(default=True, description="Explore the builtin/EnvScaler (and optionally bfcl) scenarios.")
    seed: int = Field(default=0, description="Seed of the exploration policy.")
    call_budget: int = Field(default_factory=lambda: profile.current().explore_call_budget, description="Stop after this many tool calls.")
    episode_length: int = Field(default=12, description="Calls per episode (one episode per scenario visit).")
    mutate_rate: float = Field(default=0.15, description="Chance to mutate an argument to provoke rule failures.")
    max_batch: int = Field(default=6, description="Largest list argument the policy builds (drives |Δ|).")
    cell_factor: float = Field(default=2.0, description="Candidates wanted per benchmark cell, × its quota.")
    group_factor: float = Field(default=1.3, description="Candidates wanted per Balance2 group, × its size.")
    min_envs: int = Field(default=10, description="Distinct environments wanted per benchmark cell.")

    def settings(self) -> ExploreSettings | None:
        if not self.enabled:
            return None
        return ExploreSettings(
            seed=self.seed, call_budget=self.call_budget, episode_length=self.episode_length,
            mutate_rate=self.mutate_rate, max_batch=self.max_batch, cell_factor=self.cell_factor,
            group_factor=self.group_factor, min_envs=self.min_envs,
        )


@asset(group_name="collection", deps=["environment_catalog"], kinds={"python", "parquet"})
def trajectories(
    context: AssetExecutionContext,
    config: ExplorationConfig,
    store: DataStoreResource,
    sources: EnvironmentSourcesResource,
    sandbox: SandboxResource,
) -> MaterializeResult:
    """Trajectories from executable environments: ground-truth replay of bfcl-eval's multi-turn
    tasks, plus exploration episodes over the builtin pack / EnvScaler scenarios.

    Each row holds the environment spec, its initial state (recorded in the sandbox) and the
    actions. Unusable tasks — a line that is not JSON, an unknown tool, a call string with a syntax
    error, a config that makes the reset (or the constructor) raise — are listed with their reason
    in `trajectories/issues.parquet` and in this metadata; everything else is collected.
    """
    layout = store.layout()
    with sandbox.open() as box:
        result = collect_all(sources.config(), layout, box, config.settings(), log=context.log.info)
    report = result.report
    for issue in report.issues:
        context.log.warning(f"task {issue.task_id} ({issue.stage}): {issue.reason}")
    by_cat = pd.DataFrame(sorted(report.by_category.items()), columns=["category", "trajectories"])
    metadata = {
        "trajectories": report.trajectories,
        "actions": report.actions,
        "environments": len(report.by_env),
        "rejected_tasks": len(report.issues),
        "by_strategy": MetadataValue.md(md_table(pd.DataFrame(sorted(report.by_strategy.items()), columns=["strategy", "trajectories"]), index=False)),
        "by_category": MetadataValue.md(md_table(by_cat, index=False)),
        "rejected": MetadataValue.md(md_records(report.issue_rows(), ["task_id", "stage", "reason", "origin"])),
        "path": MetadataValue.path(str(layout.trajectories.resolve())),
    }
    if result.coverage is not None:
        cov = result.coverage
        metadata["exploration_calls"] = cov.steps
        metadata["exploration_coverage"] = MetadataValue.md(md_table(pd.DataFrame([
            {"cell": c.name, "target": int(c.quota * cov.settings.cell_factor), "candidates": cov.cells[c.name],
             "environments": len(cov.cell_envs.get(c.name, ()))} for c in BENCHMARK_CELLS
        ]), index=False))
    return MaterializeResult(metadata=metadata)
