"""Stage 2: executor labeling of every step, with its asset checks."""

from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetCheckSeverity,
    AssetExecutionContext,
    Config,
    MaterializeResult,
    asset,
    asset_check,
)
from pydantic import Field

from assets.metadata import check_result, materialize, parquet_metadata
from assets.partitions import partition_metadata, scoped
from pipeline.labeling.determinism import check_determinism, kept_determinism
from pipeline.labeling.quarantine import quarantine
from pipeline.labeling.steps import label
from pipeline.quality.outcomes import CHECK as OUTCOME_CHECK
from pipeline.quality.outcomes import MAX_FAILURE_SHARE, MIN_STEPS, check_outcomes
from pipeline.quality.suites import kept_verdict
from pipeline.report.tables import Facts, Markdown
from pipeline.store.reconstruct import kept_verification
from resources import CompositionResource, DataStoreResource, RunPolicyResource, SandboxResource
from resources.config_from import default_of


class LabelingConfig(Config):
    chunk_size: int = Field(
        default=default_of(label, "chunk_size"), description="Trajectories per resumable part file."
    )


@asset(group_name="labeling", deps=["trajectories"], kinds={"python", "parquet", "duckdb"})
def labeled_steps(
    context: AssetExecutionContext,
    config: LabelingConfig,
    store: DataStoreResource,
    sandbox: SandboxResource,
    composition: CompositionResource,
) -> MaterializeResult:
    """Every step labeled by the executor: s_t (hash), a_t, code(a_t) (ref), o_t, s'_t (hash), Δ, |Δ|,
    outcome and argument count.

    Written as resumable Parquet parts under `steps/`: re-running reuses parts whose inputs did not
    change, so an interrupted run resumes. Calls that raise, hang or crash their process are
    labeled `error` steps (never an asset failure); trajectories that cannot be labeled are listed.

    Partitioned when ENVSIM_SHARDS=N is set (the partitions of `trajectories`): a partition labels
    its own trajectories into `steps/part-<partition>-<key>.parquet` and its metadata describes that
    partition; re-labeling one partition leaves the other partitions' parts alone.
    """
    layout = scoped(store.layout(), context)
    with sandbox.open() as box:
        report = label(layout, box, chunk_size=config.chunk_size, log=context.log.info)
    context.log.info(f"{report.steps} labeled steps ({report.steps_per_second:.0f} steps/s) -> {layout.steps_dir}")
    facts = report.facts(layout, composition.composition())
    return materialize(context, facts, {**parquet_metadata(layout.step_parts()), **partition_metadata(context)})


#: what the two quarantining checks do with an environment that fails them
_QUARANTINE = (
    "quarantined: its steps leave the splits, the run summary names it with the reason, and the check "
    "fails with severity WARN while the others go on (strict: ERROR, and the run stops; the `run_policy` "
    "resource's `strict`, ENVSIM_STRICT)."
)


@asset_check(
    asset=labeled_steps,
    blocking=True,
    description=(
        "Every step's Δ, applied to the state rebuilt from the initial state and earlier Δs, reproduces the "
        "recorded s'_t hash (partitioned: the partition's steps). An environment with a step that does not "
        f"verify is {_QUARANTINE}"
    ),
)
def delta_roundtrip(
    context: AssetCheckExecutionContext, store: DataStoreResource, run_policy: RunPolicyResource
) -> AssetCheckResult:
    layout = scoped(store.layout(), context)
    report = kept_verification(layout, max_problems=1_000_000)
    facts = quarantine(layout, report, strict=run_policy.strict)
    if report.kept_from:
        facts.values["verified"] = f"before, on the same step and trajectory files (report {report.kept_from})"
    held = bool(facts["quarantined_environments"].rows) and not run_policy.strict
    severity = AssetCheckSeverity.WARN if report.ok or held else AssetCheckSeverity.ERROR
    return check_result(context, facts, partition_metadata(context), passed=report.ok, severity=severity)


class DeterminismConfig(Config):
    per_env: int = Field(
        default=default_of(check_determinism, "per_env"),
        description="Trajectories of every environment re-executed from "
        "scratch (labels kept from collection included).",
    )
    sample_size: int = Field(
        default=default_of(check_determinism, "sample_size"),
        description="Further trajectories re-executed from scratch, drawn from all the others (-1: all of them).",
    )
    seed: int = Field(default=default_of(check_determinism, "seed"), description="Seed of the picks.")
    strict: bool | None = Field(
        default=None,
        description="A non-deterministic environment fails the run (severity ERROR, blocking) instead of "
        "being quarantined while the others go on (unset: the `run_policy` resource's `strict`, ENVSIM_STRICT).",
    )


@asset_check(
    asset=labeled_steps,
    blocking=True,
    description=(
        "Labels are reproducible: one trajectory of every environment and a seeded sample of the others, run again "
        "in fresh processes (same frozen clock and seeds; another CPU affinity; one environment at a time, no "
        "neighbour beside it), give the stored labels and hold no rendering of the host's real day, and steps a "
        "second execution "
        "labeled give what exploration observed (partitioned: the partition's trajectories). An environment that "
        f"differs is {_QUARANTINE} The check's `strict` config overrides the resource's. A repeated run on the same "
        "labels, catalog, code and settings reads the last verdict instead of executing again."
    ),
)
def relabel_is_deterministic(
    context: AssetCheckExecutionContext,
    config: DeterminismConfig,
    store: DataStoreResource,
    sandbox: SandboxResource,
    run_policy: RunPolicyResource,
) -> AssetCheckResult:
    strict = run_policy.strict if config.strict is None else config.strict
    with sandbox.open(workers=1) as box:  # alone: a label that depends on a neighbour differs
        report = kept_determinism(
            scoped(store.layout(), context), box, config.sample_size, config.seed, per_env=config.per_env, strict=strict
        )
    return check_result(
        context,
        report.facts(),
        partition_metadata(context),
        strict,
        passed=report.ok,
        severity=AssetCheckSeverity.ERROR if strict else AssetCheckSeverity.WARN,
        description=report.headline(),
    )


@asset_check(
    asset=labeled_steps,
    description=(
        "great-expectations: schema and nulls of the step table, outcomes in the "
        "closed set, unique step ids, |Δ| equals the Δ list length (in a partitioned "
        "run: the partition's steps; an empty partition has nothing to check)."
    ),
)
def step_table_expectations(context: AssetCheckExecutionContext, store: DataStoreResource) -> AssetCheckResult:
    layout = scoped(store.layout(), context)
    if layout.partition is not None and not layout.step_parts():
        facts = Facts({"rows": 0, "failures": Markdown("_empty partition: no steps to check_")})
        return check_result(context, facts, partition_metadata(context), passed=True)
    suite = kept_verdict(layout)
    kept = {"validated": f"before, on the same step files (verdict {suite.kept_from})"} if suite.kept_from else {}
    facts = Facts({"rows": suite.rows, "expectations_evaluated": suite.evaluated, "failures": suite.fact(), **kept})
    return check_result(context, facts, partition_metadata(context), passed=suite.success)


@asset_check(
    asset=labeled_steps,
    name=OUTCOME_CHECK,
    description=(
        "Outcome labels fit each corpus (the first component of the environment id: `bfcl`, `builtin`, an "
        f"EnvScaler prefix). A corpus with at least {MIN_STEPS} steps and no failure label (its refusals likely use a "
        f"convention the outcome rule does not know), or with more than {MAX_FAILURE_SHARE:.0%} of its non-error steps "
        "labeled failure, fails with severity WARN naming the corpus, its rule, an example observation and how to "
        "declare a rule (docs/environments.md); the run summary names it too (partitioned: the partition's steps). "
        "Each explored environment is judged on its own as well: one with many steps and no failure, while others "
        "fail or its observations read like refusals, is named with its rule and an example observation."
    ),
)
def outcome_labels_plausible(context: AssetCheckExecutionContext, store: DataStoreResource) -> AssetCheckResult:
    report = check_outcomes(scoped(store.layout(), context))
    return check_result(
        context,
        report.facts(),
        partition_metadata(context),
        passed=report.ok,
        severity=AssetCheckSeverity.WARN,
        description=report.headline(),
    )
