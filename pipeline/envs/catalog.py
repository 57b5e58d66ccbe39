"""Environment catalog: every environment of the enabled sources, its tools and their source code."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.core.issues import TaskIssue
from pipeline.core.untrusted import shown
from pipeline.envs import blobs, envscaler, registry
from pipeline.report.tables import Facts, Table
from pipeline.store import schema
from pipeline.store.layout import DataLayout
from pipeline.store.parquet_io import write_table


@dataclass
class CatalogReport:
    environments: list[dict[str, Any]] = field(default_factory=list)
    tools: int = 0
    issues: list[TaskIssue] = field(default_factory=list)

    def by_source(self) -> list[dict[str, Any]]:
        """Environments and (env, tool) pairs per source, by source."""
        rows: dict[str, dict[str, Any]] = {}
        for env in self.environments:
            row = rows.setdefault(env["source"], {"source": env["source"], "environments": 0, "tool_pairs": 0})
            row["environments"] += 1
            row["tool_pairs"] += env["num_tools"]
        return [rows[source] for source in sorted(rows)]

    def headline(self, path: Path, disabled: Mapping[str, str]) -> str:
        per_source = ", ".join(f"{r['source']} {r['environments']}" for r in self.by_source())
        return (
            f"catalog: {len(self.environments)} environments ({per_source}), {self.tools} (env, tool) pairs -> "
            f"{path}; a task that involves several runs them as one composite environment, which the steps count "
            "apart (the run's summary reconciles the two)"
            + (f"; not listed (disabled): {', '.join(f'{k} ({v})' for k, v in disabled.items())}" if disabled else "")
        )

    def facts(self, path: Path, disabled: Mapping[str, str]) -> Facts:
        """What the catalog reports (``environment_catalog``'s metadata): environments, pairs, the sources left
        out and why, the catalog, and the items rejected (each also a warning)."""
        rejected = [
            {"env_id": i.task_id, "stage": i.stage, "reason": i.reason, "origin": i.origin} for i in self.issues
        ]
        return Facts(
            {
                "environments": len(self.environments),
                "tool_pairs": self.tools,
                "rejected_items": len(self.issues),
                "disabled_sources": Table([{"source": k, "why": v} for k, v in disabled.items()], ["source", "why"]),
                "by_source": Table(self.by_source(), ["source", "environments", "tool_pairs"]),
                "catalog": Table(self.environments, ["env_id", "env_class", "license", "num_tools"]),
                "rejected": Table(rejected, ["env_id", "stage", "reason", "origin"]),
                "path": path.resolve(),
            },
            [f"env {shown(i.task_id)} ({i.stage}): {shown(i.reason, 2000)}" for i in self.issues],
        )


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
