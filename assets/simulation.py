"""Simulators in the loop: closed-loop simulated rollouts with an executor shadow (Simia), their export as
agent SFT data, and the α-curriculum SFT mixture from evaluation results (GenEnv)."""

from pathlib import Path
from typing import Literal

import pyarrow.parquet as pq
from dagster import (
    AssetCheckSpec,
    AssetExecutionContext,
    AssetKey,
    Config,
    EventLogEntry,
    MaterializeResult,
    RunRequest,
    SensorEvaluationContext,
    asset,
    asset_sensor,
)
from dagster_duckdb import DuckDBResource
from pydantic import Field

from assets.collection import AgentPolicyConfig
from assets.evaluation import SimulatorConfig, baseline_simulators
from assets.jobs import curriculum_refresh
from assets.metadata import check_result, materialize, parquet_metadata
from pipeline.collect.sources import agent_tasks, env_items, task_turns
from pipeline.curriculum.mixture import (
    CURRICULUM,
    CurriculumSpec,
    build_curriculum,
    record,
    resolve_run,
)
from pipeline.envs.catalog import load_blobs
from pipeline.evaluate.simulators import KINDS
from pipeline.models.agent_settings import AgentSettings
from pipeline.report.tables import Facts
from pipeline.rollouts import store as rollout_store
from pipeline.rollouts.loop import simulate
from pipeline.rollouts.run import roll_out, rollout_facts, rollout_files, rollout_tasks
from pipeline.rollouts.sft import export_rollouts
from resources import DataStoreResource, EnvironmentSourcesResource, SandboxResource
from resources.config_from import config_from, default_of


class RolloutConfig(Config):
    simulators: list[SimulatorConfig] = Field(
        default_factory=baseline_simulators,
        description="Simulators that play the environment; the defaults need no model.",
    )
    agent: AgentPolicyConfig = Field(
        default_factory=AgentPolicyConfig,
        description="An LLM agent (tasks from its `sources`); without a "
        "model the actions of recorded trajectories are replayed.",
    )
    task_limit: int = Field(
        default=default_of(rollout_store.recorded_tasks, "limit"),
        description="Recorded trajectories to roll out (seeded choice), or LLM-agent tasks.",
    )
    seed: int = Field(
        default=default_of(rollout_store.recorded_tasks, "seed"),
        description="Seed of the choice of recorded trajectories.",
    )
    sources: list[str] = Field(
        default_factory=list, description="Only recorded trajectories of these sources (empty: all)."
    )
    min_steps: int = Field(
        default=default_of(rollout_store.recorded_tasks, "min_steps"),
        description="Only recorded trajectories with at least this many actions.",
    )
    max_steps: int = Field(default=default_of(simulate, "max_steps"), description="Steps per rollout before it is cut.")


@asset(
    group_name="simulation",
    deps=["labeled_steps"],
    pool="duckdb",
    kinds={"duckdb", "parquet", "openai"},
    check_specs=[AssetCheckSpec("oracle_never_drifts", asset="simulated_rollouts")],
)
def simulated_rollouts(
    context: AssetExecutionContext,
    config: RolloutConfig,
    store: DataStoreResource,
    sources: EnvironmentSourcesResource,
    sandbox: SandboxResource,
    duckdb: DuckDBResource,
) -> MaterializeResult:
    """Closed-loop rollouts (Simia): an agent acts (recorded actions, or an LLM agent), each simulator plays
    the environment from its own previous predicted state, and the executor shadows every action on the real
    environment. Per step FM, CM, drift |diff(ŝ, s)| and whether ŝ had already diverged; per rollout the first
    divergence and final drift. Each rollout keeps its conversation — the task's user turns as its agent was
    asked them (a recorded trajectory's: its own message history, else its task's question from the
    configured sources) — and the tool schemas the agent was given. Parquet under `data/rollouts/`, DuckDB
    `rollout_steps`, `rollouts`, `rollout_by_simulator` / `_delta` / `_step` / `_env`; resumable (request log
    per run)."""
    layout = store.layout()
    load_blobs(layout)
    agent = config.agent.to_domain(AgentSettings) if config.agent.model else None
    cfg = sources.config(layout)
    items, _ = env_items(cfg)
    picked = agent_tasks(cfg, items, list(config.agent.sources), config.task_limit) if agent is not None else None
    questions = task_turns(cfg, items) if agent is None else None
    tasks, warnings = rollout_tasks(
        layout, picked, questions, config.task_limit, config.seed, config.sources, config.min_steps
    )
    for line in warnings:
        context.log.warning(line)
    with sandbox.open() as box:
        specs = [sim_cfg.to_domain() for sim_cfg in config.simulators]
        run_ids = roll_out(layout, box, tasks, specs, agent, config.max_steps, context.log.info, context.log.debug)
    with duckdb.get_connection() as con:
        facts, oracle = rollout_facts(con, layout, run_ids, len(tasks))
    check = check_result(
        context, Facts({"oracle": oracle.description}), check_name="oracle_never_drifts", passed=oracle.passed
    )
    return materialize(context, facts, parquet_metadata(rollout_files(layout)), check_results=[check])


class RolloutExportConfig(Config):
    filter: Literal["all", "verified", "prefix"] = Field(
        default=default_of(export_rollouts, "how"),
        description="all (Simia as published), verified (executor-verified "
        "rollouts only) or prefix (cut at the first divergence).",
    )
    simulators: list[str] = Field(
        default_factory=list, description="Only these simulators' rollouts (empty: all but the baselines)."
    )
    directory: str = Field(default="", description="Export directory (default: data/export/rollouts-<filter>).")


def _values(rollouts: Path, column: str) -> set:
    return set(pq.read_table(rollouts, columns=[column]).column(column).to_pylist())


@asset(group_name="simulation", deps=["simulated_rollouts"], kinds={"parquet", "huggingface"})
def rollout_sft_dataset(
    context: AssetExecutionContext, config: RolloutExportConfig, store: DataStoreResource
) -> MaterializeResult:
    """The simulated rollouts as agent SFT records (OpenAI messages: the task's user turns as the agent was
    asked them, its tool calls and the simulator's tool responses; plus the tool schemas the agent was given)
    in the Hugging Face layout, filtered (all / verified / prefix); the card says which filter and how many
    rollouts and steps were dropped (rollouts whose task's question is not known are never exported)."""
    layout = store.layout()
    files = sorted(rollout_store.rollouts_root(layout).glob("*/rollouts.parquet"))
    wanted = set(config.simulators)
    # unset: the files with a simulator not of a baseline kind (a row's `model` is the kind's name for a baseline)
    baseline = {name for name, kind in KINDS.items() if kind.baseline}
    chosen = [f for f in files if (_values(f, "simulator") & wanted if wanted else _values(f, "model") - baseline)]
    if not wanted and not chosen:  # only baselines so far: export them (the offline default)
        chosen = files
    directory = Path(config.directory) if config.directory else layout.export_dir(f"rollouts-{config.filter}")
    facts = export_rollouts(chosen, directory, config.filter)
    layout.record_export(f"rollouts-{config.filter}", directory)  # the summary reads it there
    context.log.info(f"{facts['kept']} of {facts['rollouts']} rollouts exported ({config.filter}) to {directory}")
    return materialize(context, facts, parquet_metadata(sorted((directory / "data").glob("*.parquet"))))


class CurriculumConfig(config_from(CurriculumSpec, exclude={"run_id"})):
    """Which evaluation run drives the curriculum, and the mixture's settings (fields: ``CurriculumSpec``)."""

    simulator: str | None = Field(
        default=None, description="Simulator whose evaluation results drive the curriculum (default: the latest run)."
    )
    split_version: str | None = Field(
        default=None, description="Benchmark version of that evaluation (default: its latest)."
    )
    make_current: bool = Field(default=True, description="Point CURRENT of the curriculum at the new version.")


@asset(group_name="simulation", deps=["simulator_eval", "step_strata"], pool="duckdb", kinds={"duckdb", "parquet"})
def curriculum_mixture(
    context: AssetExecutionContext, config: CurriculumConfig, store: DataStoreResource, duckdb: DuckDBResource
) -> MaterializeResult:
    """α-curriculum SFT mixture (GenEnv): a simulator's success per stratum / |Δ| / environment estimated from
    its evaluation results (smoothed), candidates weighted by GenEnv's exp(−β(p̂ − α)²) (or the ``flat_top``
    curve; optional difficulty filter k), versioned and decontaminated like
    Balance2 (`data/splits/curriculum/<version>/`, DuckDB `curriculum_groups`, `split_versions`)."""
    layout = store.layout()
    with duckdb.get_connection() as con:
        rid = resolve_run(con, config.simulator, config.split_version)
        spec = config.to_domain(run_id=rid)
        result = build_curriculum(layout, con, spec, config.make_current, dagster_run_id=context.run.run_id)
        record(con, layout)
    return materialize(context, result.facts(), parquet_metadata([result.path]))


@asset_sensor(
    asset_key=AssetKey("simulator_eval"),
    job=curriculum_refresh,
    description="When new evaluation results land, propose a new curriculum mixture (a new version; CURRENT moves).",
)
def curriculum_on_new_eval(context: SensorEvaluationContext, asset_event: EventLogEntry) -> RunRequest:
    return RunRequest(run_key=f"eval-{asset_event.run_id}-{asset_event.timestamp}", tags={"curriculum": CURRICULUM})
