"""Stage 1: trajectory collection (ground-truth replay + stratum-targeted exploration)."""

from dagster import AssetExecutionContext, MaterializeResult, asset
from pydantic import Field

from assets.metadata import materialize, parquet_metadata
from assets.partitions import shard_of
from pipeline.collect.explore import ExploreSettings
from pipeline.collect.run import AgentRun, collect_all
from pipeline.models.agent_settings import AgentSettings
from resources import (
    CompositionResource,
    DataStoreResource,
    EnvironmentSourcesResource,
    RunPolicyResource,
    SandboxResource,
)
from resources.config_from import config_from


class AgentPolicyConfig(config_from(AgentSettings, AgentRun, exclude={"settings"})):
    """An LLM agent solving tasks by function calling through an OpenAI-compatible endpoint (fields:
    ``AgentSettings`` and ``AgentRun``)."""

    def agent_run(self) -> AgentRun | None:
        """The agent's run; None without a model."""
        return self.to_domain(AgentRun, settings=self.to_domain(AgentSettings)) if self.model else None


class CollectionConfig(config_from(ExploreSettings, exclude={"call_budget", "max_call_budget"})):
    """Which collection policies run: ground-truth replay (bfcl, from the sources resource), seeded
    exploration steered toward strata still short of their quota (fields: ``ExploreSettings``), and an
    optional LLM agent."""

    enabled: bool = Field(default=True, description="Explore the sources' scenarios.")
    force: bool = Field(
        default=False,
        description="Collect even when the inputs are unchanged (otherwise an identical "
        "earlier collection is reused: same sources and file contents, settings, limits and code).",
    )
    agent: AgentPolicyConfig = Field(
        default_factory=AgentPolicyConfig, description="LLM agent policy (skipped without a model)."
    )
    call_budget: int | None = Field(
        default=None,
        ge=0,
        description="Stop after this many tool calls (unset: the largest of `calls_per_environment` × environments, "
        "`calls_per_scenario` × scenarios and `calls_per_tool` × tools, grown while calls find something new, at "
        "most the `run_policy` resource's `explore_call_budget`, i.e. the profile's).",
    )

    def agent_run(self) -> AgentRun | None:
        return self.agent.agent_run()

    def settings(self, max_budget: int) -> ExploreSettings | None:
        """The exploration settings (None: exploration off); a budget unset here scales with the corpus up to
        ``max_budget``."""
        return self.to_domain(call_budget=self.call_budget, max_call_budget=max_budget) if self.enabled else None


@asset(group_name="collection", deps=["environment_catalog"], kinds={"python", "parquet"})
def trajectories(
    context: AssetExecutionContext,
    config: CollectionConfig,
    store: DataStoreResource,
    sources: EnvironmentSourcesResource,
    sandbox: SandboxResource,
    composition: CompositionResource,
    run_policy: RunPolicyResource,
) -> MaterializeResult:
    """Trajectories from executable environments: ground-truth replay of bfcl-eval's multi-turn
    tasks, exploration episodes over the sources' scenarios, and (with a model
    endpoint configured) LLM-agent episodes with their full message history.

    Each row holds the environment spec, its initial state (recorded in the sandbox) and the
    actions. Unusable tasks — a line that is not JSON, an unknown tool, a call string with a syntax
    error, a config that makes the reset (or the constructor) raise — are listed with their reason
    in `trajectories/issues.parquet` and in this metadata; everything else is collected.

    Partitioned when ENVSIM_SHARDS=N is set: partition `<source>-<i>` (per registered source)
    collects the environments of that source whose blake2b hash of the env id is i mod N into
    `trajectories/part-<partition>.parquet` (issues: `issues-<partition>.parquet`); exploration gets
    the shard's share of the call budget. A source with nothing configured gives an empty partition.

    Exploration adapts to the corpus: its budget (unset) is the largest of `calls_per_environment` ×
    environments, `calls_per_scenario` × scenarios and `calls_per_tool` × tools, grown while calls still find
    something new, at most the profile's; a target no environment can reach (by what each tool has shown once it
    plateaued) is dropped and named with why (`exploration_unreachable`, and a warning), and exploration stops
    when every target is met or unreachable (`exploration_stopped`).

    Collection is deterministic: with the inputs of the last collection unchanged (sources and their
    files, exploration settings, composition, sandbox limits, code; no LLM agent) nothing is collected
    again and the recorded result is reported (`reused: true`); config `force: true` collects anyway.
    """
    layout = store.layout()
    shard = shard_of(context)
    cfg = sources.config(layout)
    with sandbox.open() as box:
        result = collect_all(
            cfg,
            layout,
            box,
            config.settings(run_policy.explore_call_budget),
            log=context.log.info,
            agent=config.agent_run(),
            composition=composition.composition(),
            shard=shard,
            force=config.force,
        )
    layout = layout.for_partition(shard.key) if shard is not None else layout
    facts = result.facts(layout, config.agent.model if config.agent_run() is not None else None)
    return materialize(context, facts, parquet_metadata(layout.trajectory_files()))
