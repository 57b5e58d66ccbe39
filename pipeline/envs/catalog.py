"""Environment catalog: every environment class, its tools and their source code."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pipeline.envs import bfcl, blobs, envscaler
from pipeline.core.issues import TaskIssue
from pipeline.store import schema
from pipeline.store.layout import DataLayout
from pipeline.store.parquet_io import write_table


@dataclass
class CatalogReport:
    environments: list[dict[str, Any]] = field(default_factory=list)
    tools: int = 0
    issues: list[TaskIssue] = field(default_factory=list)


def bfcl_catalog() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    envs, code_rows = [], []
    for cls_name in bfcl.CLASSES:
        env = bfcl.BfclEnvironment([cls_name])
        tools = env.tools
        names = [t["function"]["name"] for t in tools]
        for name in names:
            code = env.source_of(name)
            code_rows.append(
                {"code_ref": blobs.ref_of(code), "source": bfcl.SOURCE, "owner": cls_name, "tool": name, "code": code}
            )
        class_code = bfcl.class_source(cls_name)
        code_rows.append(
            {"code_ref": blobs.ref_of(class_code), "source": bfcl.SOURCE, "owner": cls_name, "tool": "", "code": class_code}
        )
        envs.append(
            {
                "source": bfcl.SOURCE,
                "env_id": f"{bfcl.SOURCE}/{cls_name}",
                "env_class": cls_name,
                "license": bfcl.LICENSE,
                "num_tools": len(names),
                "tools": names,
                "tools_json": json.dumps(tools, sort_keys=True),
                "class_code_ref": blobs.ref_of(class_code),
            }
        )
    return envs, code_rows


def envscaler_catalog(items: list[envscaler.EnvItem]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    envs, code_rows = [], []
    for item in items:
        source = item.prefix
        for name in item.tool_names:
            code = envscaler.method_source(item.class_code, item.class_name, name)
            code_rows.append({"code_ref": blobs.ref_of(code), "source": source, "owner": item.qualified_id, "tool": name, "code": code})
        code_rows.append(
            {"code_ref": blobs.ref_of(item.class_code), "source": source, "owner": item.qualified_id, "tool": "", "code": item.class_code}
        )
        envs.append(
            {
                "source": source,
                "env_id": item.qualified_id,
                "env_class": item.class_name,
                "license": item.license,
                "num_tools": len(item.tools),
                "tools": item.tool_names,
                "tools_json": json.dumps(item.tools, sort_keys=True),
                "class_code_ref": blobs.ref_of(item.class_code),
            }
        )
    return envs, code_rows


def build_catalog(
    layout: DataLayout, items: list[envscaler.EnvItem] | None = None, issues: list[TaskIssue] | None = None,
    bfcl: bool = True,
) -> CatalogReport:
    """Write ``environments.parquet`` and ``tool_code.parquet`` (bfcl classes + EnvScaler-format items).

    ``bfcl=False`` (bfcl is not a source of this run, see :func:`pipeline.collect.sources.bfcl_enabled`):
    the bfcl classes are neither listed nor counted; their tool code is still stored (content-keyed,
    so a step that names a bfcl environment anyway keeps its ``code(a_t)``). Disabled builtin / corpus
    sources contribute no ``items`` in the first place."""
    bfcl_envs, code_rows = bfcl_catalog()
    envs = bfcl_envs if bfcl else []
    more_envs, more_code = envscaler_catalog(items or [])
    envs += more_envs
    unique_code = {row["code_ref"]: row for row in code_rows + more_code}
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
