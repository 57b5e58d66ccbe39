"""Stage 0: the environment catalog."""

import pandas as pd
from dagster import AssetExecutionContext, MaterializeResult, MetadataValue, asset

from pipeline.envs.catalog import build_catalog
from pipeline.report import md_table
from resources import DataStoreResource


@asset(group_name="collection", kinds={"python", "parquet"})
def environment_catalog(context: AssetExecutionContext, store: DataStoreResource) -> MaterializeResult:
    """Every executable environment class with its tools (OpenAI function schemas) and source code.

    Writes `environments.parquet` and `tool_code.parquet` (each tool's source once, keyed by
    `code_ref`, which labeled steps reference as `code(a_t)`).
    """
    layout = store.layout()
    report = build_catalog(layout)
    table = pd.DataFrame(
        [{"source": e["source"], "class": e["env_class"], "license": e["license"], "tools": e["num_tools"]} for e in report.environments]
    )
    context.log.info(f"catalog: {len(report.environments)} environment classes, {report.tools} tools -> {layout.environments}")
    return MaterializeResult(
        metadata={
            "environments": len(report.environments),
            "tools": report.tools,
            "catalog": MetadataValue.md(md_table(table, index=False)),
            "path": MetadataValue.path(str(layout.environments.resolve())),
        }
    )
