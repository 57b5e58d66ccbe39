"""Stage 1: trajectory collection."""

import pandas as pd
from dagster import AssetExecutionContext, MaterializeResult, MetadataValue, asset

from pipeline.collect.collector import collect
from pipeline.collect.replay import ground_truth_trajectories
from pipeline.envs.bfcl_tasks import iter_tasks
from pipeline.report import md_records, md_table
from resources import DataStoreResource, EnvironmentSourcesResource, SandboxResource


@asset(group_name="collection", deps=["environment_catalog"], kinds={"python", "parquet"})
def trajectories(
    context: AssetExecutionContext,
    store: DataStoreResource,
    sources: EnvironmentSourcesResource,
    sandbox: SandboxResource,
) -> MaterializeResult:
    """Trajectories collected by ground-truth replay of bfcl-eval's multi-turn tasks.

    Each row holds the task's environment spec, its initial state (recorded by resetting the
    environment in the sandbox) and the parsed, validated actions. Tasks that cannot be used —
    a line that is not JSON, a call to an unknown tool, a call string with a syntax error, an
    initial config that makes the reset raise — are listed with their reason in
    `trajectories/issues.parquet` and in this asset's metadata; all others are collected.
    """
    layout = store.layout()
    with sandbox.open() as box:
        report = collect(
            ground_truth_trajectories(iter_tasks(sources.bfcl_files())), layout, box, log=context.log.warning
        )
    by_cat = pd.DataFrame(sorted(report.by_category.items()), columns=["category", "trajectories"])
    context.log.info(f"{report.trajectories} trajectories, {report.actions} actions -> {layout.trajectories}")
    return MaterializeResult(
        metadata={
            "trajectories": report.trajectories,
            "actions": report.actions,
            "environments": len(report.by_env),
            "rejected_tasks": len(report.issues),
            "by_category": MetadataValue.md(md_table(by_cat, index=False)),
            "rejected": MetadataValue.md(md_records(report.issue_rows(), ["task_id", "stage", "reason", "origin"])),
            "path": MetadataValue.path(str(layout.trajectories.resolve())),
        }
    )
