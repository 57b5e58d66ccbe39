"""Environment catalog: every environment of the enabled sources, its tools and their source code."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from pipeline.core.issues import TaskIssue
from pipeline.envs import blobs, envscaler, registry
from pipeline.store import schema
from pipeline.store.layout import DataLayout
from pipeline.store.parquet_io import write_table


@dataclass
class CatalogReport:
    environments: list[dict[str, Any]] = field(default_factory=list)
    tools: int = 0
    issues: list[TaskIssue] = field(default_factory=list)


def build_catalog(
    layout: DataLayout,
    items: list[envscaler.EnvItem] | None = None,
    issues: list[TaskIssue] | None = None,
    disabled: Collection[str] = (),
) -> CatalogReport:
    """Write ``environments.parquet`` and ``tool_code.parquet``: each registered source's rows
    (:meth:`pipeline.envs.source.EnvironmentSource.catalog`), in registry order; ``items`` are the run's
    EnvScaler-format items (:func:`pipeline.collect.sources.env_items`), each given to its source.

    The ``disabled`` sources (:func:`pipeline.collect.sources.disabled_sources`) are neither listed nor
    counted; bfcl's tool code is still stored (content-keyed, so a step that names a bfcl environment
    anyway keeps its ``code(a_t)``). Disabled builtin / corpus sources contribute no ``items`` in the
    first place."""
    envs: list[dict[str, Any]] = []
    code_rows: list[dict[str, Any]] = []
    items = items or []
    for source in registry.sources():
        own = [i for i in items if registry.source_of_id(envscaler.SOURCE, i.qualified_id) == source.name]
        more_envs, more_code = source.catalog(own, listed=source.name not in disabled)
        envs += more_envs
        code_rows += more_code
    unique_code = {row["code_ref"]: row for row in code_rows}
    write_table(layout.environments, envs, schema.ENVIRONMENTS)
    write_table(layout.tool_code, unique_code.values(), schema.TOOL_CODE)
    return CatalogReport(environments=envs, tools=sum(e["num_tools"] for e in envs), issues=list(issues or []))


def load_blobs(layout: DataLayout) -> None:
    """Register the catalog's class code and tool schemas, so sandboxes can build its environments."""
    import pyarrow.parquet as pq

    blobs.load_parquet(layout.tool_code)
    if layout.environments.exists():
        for text in pq.read_table(layout.environments, columns=["tools_json"]).column("tools_json").to_pylist():
            if text:
                blobs.put(text)
