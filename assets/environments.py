"""Stage 0: the environment catalog."""

from dagster import AssetExecutionContext, Failure, MaterializeResult, asset

from assets.metadata import materialize, parquet_metadata
from pipeline.collect.sources import SourceError, disabled_sources, env_items
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
    facts = build_catalog(layout, items, issues, disabled=disabled_sources(cfg))
    context.log.info(facts["headline"])
    return materialize(context, facts, parquet_metadata([layout.environments]))
