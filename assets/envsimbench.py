"""Import the published EnvSimBench (benchmark and process data) as benchmark split versions of ours."""

from dagster import AssetExecutionContext, Config, MaterializeResult, asset
from dagster_duckdb import DuckDBResource
from pydantic import Field

from assets.metadata import materialize, parquet_metadata
from pipeline.envsimbench import importer as envsimbench
from pipeline.store.versions import BENCHMARK, SplitStore
from resources import DataStoreResource, HuggingFaceHubResource
from resources.config_from import default_of
from resources.storage import DUCKDB_POOL


class EnvSimBenchImportConfig(Config):
    benchmark_files: list[str] = Field(
        default_factory=list, description="Local reference-format benchmark file(s) (JSON list / JSONL)."
    )
    process_files: list[str] = Field(default_factory=list, description="Local reference-format process-data file(s).")
    repo_id: str | None = Field(
        default=None, description=f"Download from this Hub dataset instead, e.g. {envsimbench.HUB_REPO}."
    )
    revision: str | None = Field(default=None, description="Hub revision (branch, tag or commit).")
    benchmark_patterns: list[str] = Field(
        default_factory=lambda: default_of(envsimbench.download, "patterns"), description="Hub files of the benchmark."
    )
    process_patterns: list[str] = Field(
        default_factory=list, description='Hub files of the process data, e.g. ["Process Data/*"].'
    )
    make_current: bool = Field(
        default=default_of(envsimbench.import_envsimbench, "make_current"),
        description="Make the imported benchmark the CURRENT benchmark version.",
    )


@asset(group_name="envsimbench", pool=DUCKDB_POOL, kinds={"huggingface", "duckdb"})
def envsimbench_import(
    context: AssetExecutionContext,
    config: EnvSimBenchImportConfig,
    store: DataStoreResource,
    hub: HuggingFaceHubResource,
    duckdb: DuckDBResource,
) -> MaterializeResult:
    """The published EnvSimBench as benchmark split versions marked imported (`bench-envsimbench-*`): Δ
    recomputed and checked against `change_count`, strata from our rules, `code(a_t)` cut out of `env_code`;
    samples that cannot be represented are listed by id. Score them with `simulator_eval`
    (`split_version: bench-envsimbench-…`)."""
    layout = store.layout()
    parts = {"benchmark": list(config.benchmark_files), "process": list(config.process_files)}
    if config.repo_id:
        for name, patterns in (("benchmark", config.benchmark_patterns), ("process", config.process_patterns)):
            if patterns:
                parts[name] += [
                    str(p)
                    for p in envsimbench.download(config.repo_id, patterns, config.revision, hub.token, hub.endpoint)
                ]
    reports = [
        envsimbench.import_envsimbench(layout, files, name, make_current=config.make_current and name == "benchmark")
        for name, files in parts.items()
        if files
    ]
    for r in reports:
        context.log.info(
            f"{r.version}: {r.samples} samples from {r.files}; strata {r.strata}; skipped {len(r.skipped)}; "
            f"change_count mismatches {len(r.change_count_mismatches)}"
        )
    samples = [SplitStore(layout, BENCHMARK).samples(r.version) for r in reports]
    return materialize(context, envsimbench.import_facts(reports), parquet_metadata(samples) if reports else {})
