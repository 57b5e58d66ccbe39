"""Stage 1: trajectory collection (ground-truth replay + stratum-targeted exploration)."""

import pandas as pd
from dagster import AssetExecutionContext, Config, MaterializeResult, MetadataValue, asset
from pydantic import Field

from assets.partitions import SHARDS, shard_of
from pipeline.core import profile
from pipeline.collect.explore import ExploreSettings
from pipeline.collect.agent import AgentSettings
from pipeline.collect.run import AgentRun, collect_all
from pipeline.core.report import md_records, md_table
from pipeline.core.strata import BENCHMARK_CELLS
from resources import DataStoreResource, EnvironmentSourcesResource, SandboxResource


class AgentPolicyConfig(Config):
    """An LLM agent solving tasks by function calling through an OpenAI-compatible endpoint."""

    model: str = Field(default="", description="Model name; empty = the agent policy is skipped.")
    base_url: str | None = Field(default=None, description="OpenAI-compatible endpoint (OpenAI, vLLM, LLaMA-Factory API).")
    api_key_env: str = Field(default="OPENAI_API_KEY", description="Environment variable holding the API key.")
    temperature: float = 0.0
    max_tokens: int = 1024
    concurrency: int = Field(default=4, description="Tasks run concurrently.")
    step_limit: int = Field(default=12, description="Tool calls per episode before it is cut.")
    sources: list[str] = Field(default_factory=lambda: ["builtin"], description="Task sources: builtin, envscaler, bfcl.")
    task_limit: int | None = Field(default=20, description="At most this many tasks (None = all).")


class CollectionConfig(Config):
    """Which collection policies run: ground-truth replay (bfcl, from the sources resource), seeded
    exploration steered toward strata still short of their quota, and an optional LLM agent."""

    enabled: bool = Field(default=True, description="Explore the builtin/EnvScaler (and optionally bfcl) scenarios.")
    seed: int = Field(default=0, description="Seed of the exploration policy.")
    call_budget: int = Field(default_factory=lambda: profile.current().explore_call_budget, description="Stop after this many tool calls.")
    episode_length: int = Field(default=12, description="Calls per episode (one episode per scenario visit).")
    mutate_rate: float = Field(default=0.15, description="Chance to mutate an argument to provoke rule failures.")
    max_batch: int = Field(default=6, description="Largest list argument the policy builds (drives |Δ|).")
    cell_factor: float = Field(default=2.0, description="Candidates wanted per benchmark cell, × its quota.")
    group_factor: float = Field(default=1.3, description="Candidates wanted per Balance2 group, × its size.")
    min_envs: int = Field(default=10, description="Distinct environments wanted per benchmark cell.")
    agent: AgentPolicyConfig = Field(default_factory=AgentPolicyConfig, description="LLM agent policy (skipped without a model).")

    def agent_run(self) -> AgentRun | None:
        a = self.agent
        if not a.model:
            return None
        settings = AgentSettings(model=a.model, base_url=a.base_url, api_key_env=a.api_key_env, temperature=a.temperature,
                                 max_tokens=a.max_tokens, concurrency=a.concurrency, step_limit=a.step_limit)
        return AgentRun(settings, tuple(a.sources), a.task_limit)

    def settings(self) -> ExploreSettings | None:
        if not self.enabled:
            return None
        return ExploreSettings(
            seed=self.seed, call_budget=self.call_budget, episode_length=self.episode_length,
            mutate_rate=self.mutate_rate, max_batch=self.max_batch, cell_factor=self.cell_factor,
            group_factor=self.group_factor, min_envs=self.min_envs,
        )


@asset(group_name="collection", deps=["environment_catalog"], kinds={"python", "parquet"}, partitions_def=SHARDS)
def trajectories(
    context: AssetExecutionContext,
    config: CollectionConfig,
    store: DataStoreResource,
    sources: EnvironmentSourcesResource,
    sandbox: SandboxResource,
) -> MaterializeResult:
    """Trajectories from executable environments: ground-truth replay of bfcl-eval's multi-turn
    tasks, exploration episodes over the builtin pack / EnvScaler scenarios, and (with a model
    endpoint configured) LLM-agent episodes with their full message history.

    Each row holds the environment spec, its initial state (recorded in the sandbox) and the
    actions. Unusable tasks — a line that is not JSON, an unknown tool, a call string with a syntax
    error, a config that makes the reset (or the constructor) raise — are listed with their reason
    in `trajectories/issues.parquet` and in this metadata; everything else is collected.

    Partitioned when ENVSIM_SHARDS=N is set: partition `<source>-<i>` (bfcl / builtin / envscaler)
    collects the environments of that source whose blake2b hash of the env id is i mod N into
    `trajectories/part-<partition>.parquet` (issues: `issues-<partition>.parquet`); exploration gets
    the shard's share of the call budget. A source with nothing configured gives an empty partition.
    """
    layout = store.layout()
    shard = shard_of(context)
    with sandbox.open() as box:
        result = collect_all(sources.config(), layout, box, config.settings(), log=context.log.info, agent=config.agent_run(),
                             shard=shard)
    report = result.report
    if shard is not None:
        layout = layout.for_partition(shard.key)
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
    if result.without_scenarios:
        how = ("explored from their class defaults (init config {})" if sources.explore_class_defaults
               else "not explored (explore_class_defaults is off)")
        context.log.warning(f"{len(result.without_scenarios)} corpus environments have no scenario; {how}: "
                            + ", ".join(result.without_scenarios[:20]))
        metadata["environments_without_scenarios"] = len(result.without_scenarios)
        metadata["without_scenarios"] = MetadataValue.md(
            f"{how}:\n\n" + "\n".join(f"- {e}" for e in result.without_scenarios[:200]))
    if result.shard is not None:
        metadata["partition"] = result.shard.shard.key
        metadata["partition_note"] = result.shard.note
    if config.agent_run() is None:
        metadata["agent"] = "skipped: no model endpoint configured (config agent.model / agent.base_url)"
    else:
        statuses = pd.Series([r["status"] for r in result.agent_episodes]).value_counts().to_dict()
        events = pd.Series([e["kind"] for r in result.agent_episodes for e in r["events"]]).value_counts().to_dict()
        metadata["agent"] = f"{len(result.agent_episodes)} episodes with {config.agent.model}: {statuses}; events {events}"
    if result.coverage is not None:
        cov = result.coverage
        metadata["exploration_calls"] = cov.steps
        metadata["exploration_coverage"] = MetadataValue.md(md_table(pd.DataFrame([
            {"cell": c.name, "target": int(c.quota * cov.settings.cell_factor), "candidates": cov.cells[c.name],
             "environments": len(cov.cell_envs.get(c.name, ()))} for c in BENCHMARK_CELLS
        ]), index=False))
    return MaterializeResult(metadata=metadata)
