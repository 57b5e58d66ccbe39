"""Environment catalog: every environment of the enabled sources, its tools and their source code."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import asdict
from typing import Any

from pipeline.core.issues import TaskIssue
from pipeline.core.untrusted import shown
from pipeline.envs import blobs, envscaler, registry
from pipeline.report.tables import Facts, Table
from pipeline.store import schema
from pipeline.store.layout import DataLayout
from pipeline.store.parquet_io import write_table


def build_catalog(
    layout: DataLayout,
    items: list[envscaler.EnvItem] | None = None,
    issues: list[TaskIssue] | None = None,
    disabled: Collection[str] = (),
) -> Facts:
    """Write ``environments.parquet`` and ``tool_code.parquet``: each registered source's rows
    (:meth:`pipeline.envs.source.EnvironmentSource.catalog`), in registry order, given its own of the run's
    EnvScaler-format ``items``. The ``disabled`` sources (a mapping: with why) are neither listed nor counted (bfcl's
    tool code is still stored, so a step naming a bfcl environment keeps its ``code(a_t)``). Its facts: headline,
    counts (per source too), the sources left out, the catalog, and the rejected ``issues`` (each a warning)."""
    issues = issues or []
    disabled = disabled if isinstance(disabled, Mapping) else dict.fromkeys(disabled, "disabled")
    envs: list[dict[str, Any]] = []
    code_rows: list[dict[str, Any]] = []
    for source in registry.sources():
        own = [i for i in items or [] if registry.source_of_id(i.adapter, i.qualified_id) == source.name]
        more_envs, more_code = source.catalog(own, listed=source.name not in disabled)
        envs += more_envs
        code_rows += more_code
    unique_code = {row["code_ref"]: row for row in code_rows}
    write_table(layout.environments, envs, schema.ENVIRONMENTS)
    write_table(layout.tool_code, unique_code.values(), schema.TOOL_CODE)
    by_source: dict[str, dict[str, Any]] = {}
    for env in envs:
        row = by_source.setdefault(env["source"], {"source": env["source"], "environments": 0, "tool_pairs": 0})
        row["environments"] += 1
        row["tool_pairs"] += env["num_tools"]
    tools = sum(e["num_tools"] for e in envs)
    per_source = ", ".join(f"{source} {row['environments']}" for source, row in sorted(by_source.items()))
    headline = (
        f"catalog: {len(envs)} environments ({per_source}), "
        f"{tools} (env, tool) pairs -> {layout.environments}; a task that involves several runs them as one composite "
        "environment, which the steps count apart (the run's summary reconciles the two)"
        + (f"; not listed (disabled): {', '.join(f'{k} ({v})' for k, v in disabled.items())}" if disabled else "")
    )
    rejected = [{"env_id": i.task_id, **asdict(i)} for i in issues]
    return Facts(
        {
            "headline": headline,
            "environments": len(envs),
            "tool_pairs": tools,
            "rejected_items": len(issues),
            "disabled_sources": Table([{"source": k, "why": v} for k, v in disabled.items()], ["source", "why"]),
            "by_source": Table([by_source[s] for s in sorted(by_source)], ["source", "environments", "tool_pairs"]),
            "catalog": Table(envs, ["env_id", "env_class", "license", "num_tools"]),
            "rejected": Table(rejected, ["env_id", "stage", "reason", "origin"]),
            "path": layout.environments.resolve(),
        },
        [f"env {shown(i.task_id)} ({i.stage}): {shown(i.reason, 2000)}" for i in issues],
    )


def load_blobs(layout: DataLayout) -> None:
    """Register the catalog's class code and tool schemas, so sandboxes can build its environments."""
    import pyarrow.parquet as pq

    blobs.load_parquet(layout.tool_code)
    if layout.environments.exists():
        for text in pq.read_table(layout.environments, columns=["tools_json"]).column("tools_json").to_pylist():
            if text:
                blobs.put(text)
