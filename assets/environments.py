"""Stage 0: the environment catalog."""

import pandas as pd
from dagster import AssetExecutionContext, Failure, MaterializeResult, MetadataValue, asset

from assets.metadata import frame_table, parquet_metadata, records_table
from pipeline.collect.sources import SourceError, disabled_sources, env_items
from pipeline.core.untrusted import shown
from pipeline.envs.catalog import build_catalog
from resources import DataStoreResource, EnvironmentSourcesResource


@asset(group_name="collection", kinds={"python", "parquet"})
def environment_catalog(
    context: AssetExecutionContext, store: DataStoreResource, sources: EnvironmentSourcesResource
) -> MaterializeResult:
    """Every executable environment of the enabled sources (`pipeline.envs.registry`) — bfcl-eval
    classes, the builtin pack, EnvScaler corpora — with its tools (OpenAI function schemas) and source code. Disabled
    sources (bfcl without tasks to replay or explore, `builtin: {enabled: false}`, no corpus) are neither listed nor
    counted; the metadata names them (`disabled_sources`).

    Writes `environments.parquet` and `tool_code.parquet` (each tool's and class's source once,
    keyed by `code_ref`, which labeled steps reference as `code(a_t)`). Env items that do not
    compile, lack their class, or whose tool schemas do not fit the methods are listed, not fatal.
    """
    layout = store.layout()
    cfg = sources.config(layout)
    try:
        items, issues = env_items(cfg)
    except SourceError as exc:  # a configured file missing or unreadable, or a corpus that gives nothing
        raise Failure(description=str(exc)) from None
    disabled = disabled_sources(cfg)
    report = build_catalog(layout, items, issues, disabled=disabled)
    for issue in report.issues:
        context.log.warning(f"env {shown(issue.task_id)} ({issue.stage}): {shown(issue.reason, 2000)}")
    table = pd.DataFrame(report.environments, columns=["source", "env_id", "env_class", "license", "num_tools"])
    by_source = (
        table.groupby("source").agg(environments=("env_id", "count"), tool_pairs=("num_tools", "sum")).reset_index()
    )
    per_source = ", ".join(f"{row.source} {row.environments}" for row in by_source.itertuples())
    context.log.info(
        f"catalog: {len(report.environments)} environments ({per_source}), {report.tools} (env, tool) pairs -> "
        f"{layout.environments}; a task that involves several runs them as one composite environment, which the "
        "steps count apart (the run's summary reconciles the two)"
        + (f"; not listed (disabled): {', '.join(f'{k} ({v})' for k, v in disabled.items())}" if disabled else "")
    )
    return MaterializeResult(
        metadata={
            "environments": len(report.environments),
            "tool_pairs": report.tools,
            "rejected_items": len(report.issues),
            "disabled_sources": records_table(
                [{"source": k, "why": v} for k, v in disabled.items()], ["source", "why"]
            ),
            "by_source": frame_table(by_source),
            "catalog": frame_table(table[["env_id", "env_class", "license", "num_tools"]]),
            "rejected": records_table(
                [
                    {"env_id": i.task_id, "stage": i.stage, "reason": i.reason, "origin": i.origin}
                    for i in report.issues
                ],
                ["env_id", "stage", "reason", "origin"],
            ),
            "path": MetadataValue.path(str(layout.environments.resolve())),
            **parquet_metadata([layout.environments]),
        }
    )
