"""Stage 5: score simulators on a benchmark split version; results land in DuckDB."""

from dagster import (
    AssetCheckSpec,
    AssetExecutionContext,
    Config,
    Failure,
    MaterializeResult,
    asset,
)
from dagster_duckdb import DuckDBResource
from pydantic import Field, field_validator

from assets.metadata import check_result, materialize, metadata_of
from pipeline.evaluate import results
from pipeline.evaluate.run import Scored, score_all
from pipeline.evaluate.samples import load_samples
from pipeline.evaluate.simulators import KINDS, SimulatorSpec, simulator_spec
from pipeline.report.tables import Facts, Table
from resources import DataStoreResource
from resources.config_from import config_from, with_sections
from resources.storage import DUCKDB_POOL


class SimulatorConfig(config_from(SimulatorSpec, exclude={"settings"})):
    """A simulator to score: the fields every kind has (``SimulatorSpec``; ``kind``: one of the registry ``KINDS``)
    and its kind's settings in the section named after it (``openai: {model: …, base_url: …}``,
    ``recorded: {completions: …}``; :func:`kind_sections`)."""

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, kind: str) -> str:
        if kind not in KINDS:
            raise ValueError(f"unknown simulator kind {kind!r}; known: {', '.join(KINDS)}")
        return kind

    def to_domain(self) -> SimulatorSpec:  # type: ignore[override]
        """The ``SimulatorSpec``: its kind's section becomes its ``settings`` (another kind's section is an error)."""
        fields = {name: getattr(self, name) for name in type(self).__domains__[SimulatorSpec]}
        sections = {name: section.to_domain() for name in KINDS if (section := getattr(self, name, None)) is not None}
        return simulator_spec(**fields, **sections)


def kind_sections() -> bool:
    """A section in ``SimulatorConfig`` per kind registered now: whether one changed (``with_sections``)."""
    return with_sections(SimulatorConfig, KINDS.values(), "kind", optional=True)


kind_sections()


def baseline_simulators() -> list[SimulatorConfig]:
    """The simulators that need no model (oracle, no_change): the default of every list of simulators."""
    return [SimulatorConfig(name=kind, kind=kind) for kind in ("oracle", "no_change")]


class EvalConfig(Config):
    """Which simulators are scored on which benchmark version."""

    split_version: str | None = Field(default=None, description="Benchmark version (default: CURRENT).")
    simulators: list[SimulatorConfig] = Field(
        default_factory=baseline_simulators,
        description="Simulators to score; the defaults need no model.",
    )


@asset(
    group_name="evaluation",
    deps=["benchmark_split"],
    pool=DUCKDB_POOL,
    kinds={"duckdb", "openai"},
    check_specs=[AssetCheckSpec("oracle_is_perfect", asset="simulator_eval")],
)
def simulator_eval(
    context: AssetExecutionContext, config: EvalConfig, store: DataStoreResource, duckdb: DuckDBResource
) -> MaterializeResult:
    """Feedback Match and exact Config Match (primary), cm_reference / fm_reference (the EnvSimBench
    evaluation code's numbers) and cm_changed_paths of each simulator on a benchmark version (ours or an
    imported one), per stratum / |Δ| / environment / argument count, in DuckDB (`eval_runs`,
    `eval_results`, `eval_by_group`, `eval_by_delta`, …). Results are persisted per sample, so a
    re-run resumes — only what the same simulator answered: the same weights (`weights_id`, when set),
    else the same name, model and base_url. Failed requests (timeouts, 5xx, malformed or oversized responses) are
    recorded apart (`status = 'request_failed'`, the reason in `request_error`), never scored as wrong answers, and
    asked again on a re-run; a simulator whose requests mostly failed fails the asset with the endpoint's errors
    once every simulator's results are stored."""
    layout = store.layout()
    version, samples = load_samples(layout, config.split_version)

    def land(run: Scored) -> None:  # each simulator's results in DuckDB as soon as it is scored
        if run.failure:  # recorded; the other simulators still run, the asset fails below
            context.log.error(run.failure)
        context.log.info(run.line())
        with duckdb.get_connection() as con:
            results.load_run(con, run.path, run.run_id)

    runs = score_all(layout, version, samples, [s.to_domain() for s in config.simulators], land)
    run_ids = [run.run_id for run in runs]
    endpoint_failures = [run.failure for run in runs if run.failure]
    if endpoint_failures:
        with duckdb.get_connection() as con:
            table = results.summary(con, run_ids)
        raise Failure(
            description="; ".join(endpoint_failures),
            metadata=metadata_of({"split_version": version, "summary": Table.of_frame(table)}),
        )
    with duckdb.get_connection() as con:
        facts, oracle = results.run_facts(con, layout.eval_dir(version), version, run_ids, len(samples))
    verdict = Facts({"oracle": str(oracle) if oracle else "oracle was not evaluated"})
    passed = oracle is not None and oracle[0] == 100 and oracle[1] == 100
    check = check_result(context, verdict, check_name="oracle_is_perfect", passed=passed)
    return materialize(context, facts, check_results=[check])
