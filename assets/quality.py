"""The corpus quality gate: the executor's report card per environment, the simulator-judged yield
per checker and the accepted corpus; tables in DuckDB (`env_quality`, `env_tool_quality`, `env_yield`)."""

from pathlib import Path

from dagster import AssetExecutionContext, MaterializeResult, asset
from dagster_duckdb import DuckDBResource
from pydantic import Field

from assets.evaluation import SimulatorConfig, baseline_simulators
from assets.metadata import materialize, parquet_metadata
from pipeline.envs import envscaler, registry
from pipeline.quality.environment_report import GATE_SETTING, Thresholds, gate_splits
from pipeline.quality.environment_report import environment_report as report_card
from pipeline.quality.environment_yield import YieldSettings, gate
from pipeline.select.samples import materialize_samples
from resources import CompositionResource, DataStoreResource, EnvironmentSourcesResource
from resources.config_from import config_from
from resources.storage import DUCKDB_POOL


class ReportConfig(config_from(Thresholds)):
    """When the executor fails an environment (fields: ``Thresholds``), and whether those it fails feed the splits."""

    gate_splits: bool = Field(
        default=True,
        description="Leave the environments the executor fails out of the splits (every step of theirs excluded by "
        "`step_strata`, the reason in the summary); false lets them back in.",
    )


@asset(group_name="quality", deps=["labeled_steps"], pool=DUCKDB_POOL, kinds={"duckdb", "parquet"})
def environment_report(
    context: AssetExecutionContext,
    config: ReportConfig,
    store: DataStoreResource,
    duckdb: DuckDBResource,
    composition: CompositionResource,
    sources: EnvironmentSourcesResource,
) -> MaterializeResult:
    """One row per environment (`env_quality`) and per environment and tool (`env_tool_quality`): tools and
    scenarios used, steps by outcome, error steps per tool with the most frequent exception and an example call,
    determinism and quarantine reason, max |Δ| and the benchmark cells it can fill, schema/code mismatches, state
    problems — and the executor's verdict (pass / fail with the main problem) under the configured thresholds
    (error share, a tool that always raises, non-determinism, mismatches, no state change). The environments it
    fails are left out of the splits (`quality/gate.parquet`, which `step_strata` excludes) unless `gate_splits` is
    false."""
    layout = store.layout()
    prefixes = {Path(c.env_items).name: c.prefix for c in sources.config(layout).of(registry.get(envscaler.SOURCE))}
    report = report_card(layout, config.to_domain(Thresholds), composition.composition(), prefixes=prefixes)
    context.log.info(report.headline())
    gated = gate_splits(layout, report, config.gate_splits)
    if gated:
        context.log.warning(
            f"quality gate: {len(gated)} environment(s) left out of the splits ({', '.join(gated)}); {GATE_SETTING} "
            "lets them back in"
        )
    return materialize(context, report.facts(layout.env_quality), parquet_metadata([layout.env_quality], "env_quality"))


class YieldConfig(config_from(YieldSettings)):
    """Which checkers judge the probe sets, and the gate (fields: ``YieldSettings``)."""

    checkers: list[SimulatorConfig] = Field(
        default_factory=baseline_simulators,
        description="Checkers (any simulator kind: a served model, a trained checkpoint); the defaults need no model.",
    )
    gate_checker: str | None = Field(
        default=None, description="The checker whose verdicts decide the accepted corpus (default: the first)."
    )


@asset(
    group_name="quality",
    deps=["environment_report", "step_strata"],
    pool=DUCKDB_POOL,
    kinds={"duckdb", "parquet", "openai"},
)
def environment_yield(
    context: AssetExecutionContext,
    config: YieldConfig,
    store: DataStoreResource,
    duckdb: DuckDBResource,
    sources: EnvironmentSourcesResource,
) -> MaterializeResult:
    """EnvScaler's environment check with simulators as checkers: a seeded probe set of positive and negative
    calls per environment, scored by every configured checker (FM, CM, cm_reference; EnvScaler's pass_acc and
    not_fail_acc), pass at the threshold, and per checker its yield, tokens and wall time (`env_yield`, versioned
    by corpus fingerprint, weights id and threshold; the executor's verdict a column of its own). The environments
    that pass both the executor and the gate checker are exported with their scenarios in EnvScaler's released
    layout (`quality/accepted/`: `run.yaml` reruns the pipeline on them) with a card."""
    layout = store.layout()
    corpora = sources.config(layout).of(registry.get(envscaler.SOURCE))
    report, accepted = gate(
        layout,
        [c.to_domain() for c in config.checkers],
        corpora,
        materialize_samples,
        config.to_domain(YieldSettings),
        config.gate_checker,
    )
    for line in report.table():
        context.log.info(
            f"checker {line['checker']}: yield {line['yield']:.0%} ({line['passing']} of "
            f"{line['environments']}), {line['seconds']}s"
        )
    metadata = parquet_metadata([c.path for c in report.checkers], "env_yield")
    return materialize(context, report.facts(accepted), metadata)
