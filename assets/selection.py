"""Stage 3: stratification, the versioned benchmark split and the Balance2 SFT mixture."""

from collections.abc import Iterator
from enum import Enum
from typing import Any, Literal

from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    Config,
    DataVersion,
    MaterializeResult,
    asset,
)
from dagster_duckdb import DuckDBResource
from pydantic import Field

from assets.metadata import check_result, materialize, parquet_metadata
from pipeline.core.decontamination import DECONTAMINATION, DEFAULT_DECONTAMINATION
from pipeline.quality.suites import composition_suite, overlap_suite
from pipeline.report.tables import Facts, Markdown
from pipeline.select.selection import (
    MIXTURE_COMPOSITIONS,
    SelectionResult,
    build_benchmark,
    build_mixture,
)
from pipeline.select.shortfall import SHORTFALL_FIX
from pipeline.select.stratify import strata_facts, stratify
from pipeline.store.layout import DataLayout
from pipeline.store.versions import BENCHMARK, EmptySelection, SplitStore
from resources import CompositionResource, DataStoreResource, RunPolicyResource
from resources.storage import DUCKDB_POOL


@asset(
    group_name="selection", deps=["labeled_steps", "environment_report"], pool=DUCKDB_POOL, kinds={"duckdb", "parquet"}
)
def step_strata(
    context: AssetExecutionContext, store: DataStoreResource, duckdb: DuckDBResource, composition: CompositionResource
) -> MaterializeResult:
    """Every labeled step with its outcome, |Δ| bucket (`0` / `1-2` / `3-6` / `7-12` / `13+`),
    argument cardinality, default benchmark cell, Balance2 group and (s_t, a_t) sample hash. Error
    steps are kept but marked excluded from both splits, and so are steps the determinism check found
    non-deterministic (and the later steps of their trajectories) and the steps of environments the quality gate
    left out (`environment_report`), with the reason (its `duckdb`
    resource then refreshes the DuckDB views). The candidates per cell are counted against the composition in
    force (resource `composition`, default: the profile's)."""
    layout = store.layout()
    stratify(layout)
    facts = strata_facts(layout, composition.composition())
    context.log.info(f"{facts['steps']} steps stratified ({facts['usable_steps']} usable) -> {layout.strata}")
    return materialize(
        context, facts, parquet_metadata([layout.strata]), data_version=DataVersion(facts["input_fingerprint"])
    )


class Shortfall(str, Enum):
    """What a benchmark cell that cannot be filled does (a config enum: a mistyped value is refused at launch)."""

    fail = "fail"
    warn = "warn"


class BenchmarkConfig(Config):
    seed: int | None = Field(
        default=None,
        description="Seed of the pick order; a new seed gives a new version. Unset: the CURRENT benchmark's seed (0 "
        "when there is none), so a run without a seed never undoes a scheduled (weekly_splits) or seeded split.",
    )
    on_shortfall: Shortfall | None = Field(
        default=None,
        description="A cell the corpus cannot fill warns (the benchmark holds what the corpus "
        "allows, the mixture is built from the rest) or fails the asset (unset: "
        "the `composition` resource's: `warn`, `fail` with ENVSIM_STRICT=1).",
    )
    make_current: bool = Field(default=True, description="Point CURRENT at the new version.")


def _composition_check(
    context: Any, name: str, result: SelectionResult, on_shortfall: str, layout: DataLayout
) -> AssetCheckResult:
    """Every stratum holds exactly its quota; a short one fails the check (WARN, or ERROR with ``on_shortfall: fail``)
    naming it, for a benchmark cell what the corpus reaches (``difficult (|Δ| 7–12): 0 of 50, max |Δ| …``), the fix."""
    suite = composition_suite(result.strata, layout.verdict(name))
    short = result.shortfall_lines()
    fix = {"fix": SHORTFALL_FIX} if short and result.reach else {}
    values = {
        "expectations": suite.fact(),
        "short_strata": len(short),
        "shortfall_detail": Markdown("\n".join(f"- {line}" for line in short) or "_none_"),
        **fix,
    }
    return check_result(
        context,
        Facts(values),
        check_name=name,
        passed=suite.success and not short,
        severity=AssetCheckSeverity.ERROR if on_shortfall == "fail" else AssetCheckSeverity.WARN,
        description=("short strata: " + "; ".join(short) + (f" — fix: {fix['fix']}" if fix else "")) if short else None,
    )


def _skipped(
    context: AssetExecutionContext, exc: EmptySelection, checks: dict[str, bool]
) -> Iterator[AssetCheckResult]:
    """A product the corpus cannot fill at all (``EmptySelection``, ``on_shortfall: warn``): the reason logged, each
    check answered (``checks``: name -> passed, WARN), nothing materialized: Dagster skips what is downstream of it."""
    context.log.warning(f"skipped: {exc}")
    for name, passed in checks.items():
        yield check_result(
            context,
            Facts(),
            check_name=name,
            passed=passed,
            severity=AssetCheckSeverity.WARN,
            description=None if passed else f"skipped: {exc}",
        )


@asset(
    group_name="selection",
    deps=["step_strata"],
    pool=DUCKDB_POOL,
    kinds={"duckdb", "parquet"},
    check_specs=[AssetCheckSpec("composition_matches", asset="benchmark_split")],
    output_required=False,
)
def benchmark_split(
    context: AssetExecutionContext,
    config: BenchmarkConfig,
    store: DataStoreResource,
    duckdb: DuckDBResource,
    composition: CompositionResource,
    run_policy: RunPolicyResource,
) -> Iterator[MaterializeResult | AssetCheckResult]:
    """The benchmark split: the EnvSimBench composition (20 failure; 40 + 40 no_change with 0 / 1
    arguments; 25 + 25 simple; 50 each for |Δ| 3, 4, 5, 6; 50 difficult) picked to maximise distinct
    environments, deterministic for (seed, input fingerprint, composition) — which is also its
    version id. Each sample carries full s_t, a_t, code(a_t), o_t, s'_t, Δ and its strata. A corpus that
    cannot fill every cell gives the benchmark it allows (`on_shortfall: warn`, the default): the check
    `composition_matches` warns naming each missing cell, what the corpus reaches and the fix;
    `on_shortfall: fail` (or ENVSIM_STRICT=1) fails the asset instead. A corpus that fills no cell at all skips
    the benchmark (and what is drawn from it) with the reason, unless `on_shortfall: fail`."""
    layout = store.layout()
    on_shortfall = config.on_shortfall.value if config.on_shortfall is not None else run_policy.on_shortfall
    try:
        result = build_benchmark(
            layout,
            composition.composition().cells,
            config.seed,
            on_shortfall,
            config.make_current,
            dagster_run_id=context.run.run_id,
        )
    except EmptySelection as exc:
        if on_shortfall == "fail":
            raise
        yield from _skipped(context, exc, {"composition_matches": False})
        return
    yield materialize(
        context,
        result.facts(),
        parquet_metadata([result.path]),
        check_results=[_composition_check(context, "composition_matches", result, on_shortfall, layout)],
        data_version=DataVersion(result.version),
    )


#: the decontamination rules and the mixture compositions (registries: plugins' included) as config enums (a
#: mistyped value is refused at launch, listing them)
Decontaminate = Enum("Decontaminate", {name: name for name in DECONTAMINATION}, type=str)
Composed = Enum("Composed", {name: name for name in MIXTURE_COMPOSITIONS}, type=str)


class MixtureConfig(Config):
    seed: int | None = Field(
        default=None, description="Seed of the pick order. Unset: the CURRENT mixture's seed (0 when there is none)."
    )
    decontaminate: Decontaminate = Field(  # type: ignore[valid-type]
        default=Decontaminate[DEFAULT_DECONTAMINATION],
        description="What no mixture step may share with the benchmark: `trajectory` (default: its trajectory, or its "
        "(env, s_t, tool, arguments)), `task_id` (its task/scenario, or its (s_t, a_t)) or `env_id` (its environment, "
        "or its (s_t, a_t)), or a plugin's rule.",
    )
    composition: Composed = Field(  # type: ignore[valid-type]
        default=Composed["balance2"],
        description="How the mixture is composed: `balance2` (the Balance2 groups and sizes), `uniform` (as many "
        "samples drawn uniformly from the same pool: the ablation baseline), or a plugin's composition.",
    )
    benchmark_version: str | None = Field(
        default=None, description="Benchmark version to decontaminate against (default: CURRENT)."
    )
    on_shortfall: Literal["fail", "warn"] = Field(default="warn")
    make_current: bool = True


@asset(
    group_name="selection",
    deps=["benchmark_split"],
    pool=DUCKDB_POOL,
    kinds={"duckdb", "parquet"},
    check_specs=[
        AssetCheckSpec("mixture_composition", asset="sft_mixture"),
        AssetCheckSpec("no_benchmark_overlap", asset="sft_mixture", blocking=True),
    ],
    output_required=False,
)
def sft_mixture(
    context: AssetExecutionContext,
    config: MixtureConfig,
    store: DataStoreResource,
    duckdb: DuckDBResource,
    composition: CompositionResource,
) -> Iterator[MaterializeResult | AssetCheckResult]:
    """The Balance2 SFT mixture: 1,000 failure + 1,000 no_change + 2,000 simple + 2,230 complex
    (|Δ| ≥ 3) by default, decontaminated against a benchmark version: by default no step of a benchmark
    trajectory and no benchmark (env, s_t, tool, arguments); stricter, no step of a benchmark task
    (`task_id`) or environment (`env_id`). What each rule removed is in the `strata` table per group. A corpus
    that leaves no sample for it (all of a few tasks in the benchmark) skips it with the reason and the fix,
    unless `on_shortfall: fail`."""
    layout = store.layout()
    rule = config.decontaminate.value
    try:
        result = build_mixture(
            layout,
            composition.composition().mixture_sizes,
            config.seed,
            rule,
            config.benchmark_version,
            config.on_shortfall,
            config.make_current,
            composition=config.composition.value,
            dagster_run_id=context.run.run_id,
        )
    except EmptySelection as exc:
        if config.on_shortfall == "fail":
            raise
        yield from _skipped(context, exc, {"mixture_composition": False, "no_benchmark_overlap": True})
        return
    bench_samples = SplitStore(layout, BENCHMARK).samples(result.spec["benchmark"])
    overlap = overlap_suite(result.path, str(bench_samples), rule, layout.verdict("no_benchmark_overlap"))
    benchmark = {"benchmark_version": result.spec["benchmark"], "decontaminated_by": rule}
    yield materialize(
        context,
        result.facts(),
        {**parquet_metadata([result.path]), **benchmark},
        data_version=DataVersion(result.version),
        check_results=[
            _composition_check(context, "mixture_composition", result, config.on_shortfall, layout),
            check_result(
                context,
                Facts({"expectations": overlap.fact()}),
                check_name="no_benchmark_overlap",
                passed=overlap.success,
            ),
        ],
    )
