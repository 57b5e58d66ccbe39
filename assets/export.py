"""Stage 4: Hugging Face datasets of the current splits (and optional push to the Hub)."""

from pathlib import Path
from typing import Literal

from dagster import (
    AssetCheckSpec,
    AssetExecutionContext,
    Config,
    DataVersion,
    MaterializeResult,
    asset,
)
from pydantic import Field

from assets.metadata import check_result, materialize, parquet_metadata
from pipeline.export.hf_layout import export_split
from pipeline.export.hub import push_export
from pipeline.export.revisions import export_revision
from pipeline.export.verify import kept_export_checks
from pipeline.report.tables import Facts, Markdown
from pipeline.store.versions import BENCHMARK, MIXTURE, SplitStore, split_kind
from resources import DataStoreResource, HuggingFaceHubResource
from resources.config_from import default_of


class ExportConfig(Config):
    version: str | None = Field(default=None, description="Split version to export (default: CURRENT).")
    directory: str | None = Field(
        default=None,
        description="Export directory (default: <data root>/export/<kind>/<version>/, "
        "with export/<kind>/current pointing at the version exported last).",
    )
    max_shard_mb: int = Field(
        default=default_of(export_split, "max_shard_bytes") // 2**20, description="Upper bound of a Parquet shard, MiB."
    )
    license: str = Field(default=default_of(export_split, "license"), description="License in the dataset card.")
    repo_id: str | None = Field(default=None, description="Hub dataset repo to push to; unset = local export only.")
    dry_run: bool = Field(default=False, description="List what would be uploaded, upload nothing.")
    prompt: Literal["envsim", "envsimbench"] = Field(
        default="envsim",
        description="Prompt template of the SFT records: envsim (ours) or envsimbench (the reference "
        "evaluation prompt: whole class, indent-2 state).",
    )
    envsimbench_format: bool | None = Field(
        default=None,
        description="Also write the split in the published EnvSimBench format (envsimbench/benchmark.json; "
        "for the mixture also envsimbench/sft_alpaca.jsonl + a dataset_info.json entry). "
        "Default: yes for the benchmark, no for the mixture (every record carries its whole class).",
    )


def _listed(problems: list[str]) -> Markdown:
    return Markdown("\n".join(f"- {p}" for p in problems[:50]) or "_none_")


def _export(
    context: AssetExecutionContext,
    kind: str,
    config: ExportConfig,
    store: DataStoreResource,
    hub: HuggingFaceHubResource,
) -> MaterializeResult:
    layout = store.layout()
    of_kind = split_kind(kind)
    reference = config.envsimbench_format if config.envsimbench_format is not None else of_kind.reference_format
    options = dict(
        max_shard_bytes=config.max_shard_mb * 2**20,
        license=config.license,
        prompt=config.prompt,
        envsimbench_format=reference,
    )
    unchanged = False
    if config.directory:  # an explicit directory holds one version (another one there is refused)
        directory = Path(config.directory)
        report = export_split(layout, kind, config.version, directory, **options)
        layout.record_export(kind, directory, version=report.version)  # SFT training and the summary read it there
    else:
        revision = export_revision(layout, kind, config.version, **options)
        report, unchanged, directory = revision.report, revision.unchanged, revision.report.directory
    samples = SplitStore(layout, kind).samples(report.version)
    checks, checks_kept = kept_export_checks(layout, kind, directory, samples, report.split, of_kind.sft_records)
    if config.repo_id:
        push = push_export(directory, config.repo_id, hub.token, hub.endpoint, hub.private, config.dry_run)
        status = (
            f"dry run: would upload {len(push.files)} files ({push.bytes} bytes) to {config.repo_id} @ {push.revision}"
            if push.dry_run
            else f"pushed to {config.repo_id}, commit {push.commit}, tag {push.revision}"
        )
    else:
        status = "exported locally only (no repo_id configured)"
    context.log.info(
        f"{kind} {report.version}: {report.rows} rows -> {directory}"
        f"{' (already exported: unchanged)' if unchanged else ''}; {status}"
        f"{'; its checks kept from the last run (the same files)' if checks_kept else ''}"
    )
    return materialize(
        context,
        report.facts(unchanged, status),
        parquet_metadata(sorted((directory / "data").glob("*.parquet"))),
        data_version=DataVersion(f"{report.version}:{config.prompt}:{int(reference)}"),
        check_results=[
            check_result(context, Facts({"problems": _listed(problems)}), check_name=name, passed=not problems)
            for name, problems in checks
        ],
    )


@asset(
    group_name="export",
    deps=["benchmark_split"],
    kinds={"parquet", "huggingface"},
    check_specs=[
        AssetCheckSpec("loads_back_exactly", asset="benchmark_dataset"),
        AssetCheckSpec("card_matches_data", asset="benchmark_dataset"),
    ],
)
def benchmark_dataset(
    context: AssetExecutionContext, config: ExportConfig, store: DataStoreResource, hub: HuggingFaceHubResource
) -> MaterializeResult:
    """The current benchmark split as a Hugging Face dataset: `data/test-*.parquet` shards and a dataset
    card (composition, env coverage, provenance, licenses); pushed to the Hub when `repo_id` is set."""
    return _export(context, BENCHMARK, config, store, hub)


@asset(
    group_name="export",
    deps=["sft_mixture"],
    kinds={"parquet", "huggingface"},
    check_specs=[
        AssetCheckSpec("loads_back_exactly", asset="sft_dataset"),
        AssetCheckSpec("card_matches_data", asset="sft_dataset"),
        AssetCheckSpec("answers_reproduce_next_state", asset="sft_dataset"),
    ],
)
def sft_dataset(
    context: AssetExecutionContext, config: ExportConfig, store: DataStoreResource, hub: HuggingFaceHubResource
) -> MaterializeResult:
    """The current Balance2 mixture as a Hugging Face dataset plus SFT records (chat messages, Alpaca)
    from the shared prompt protocol and a LLaMA-Factory `dataset_info.json`."""
    return _export(context, MIXTURE, config, store, hub)
