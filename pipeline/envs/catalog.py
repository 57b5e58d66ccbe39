"""Environment catalog: every environment class, its tools and their source code."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pipeline.envs import bfcl
from pipeline.labeling.labeler import code_ref
from pipeline.store import schema
from pipeline.store.layout import DataLayout
from pipeline.store.parquet_io import write_table


@dataclass
class CatalogReport:
    environments: list[dict[str, Any]] = field(default_factory=list)
    tools: int = 0


def bfcl_catalog() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    envs, code_rows = [], []
    for cls_name in bfcl.CLASSES:
        env = bfcl.BfclEnvironment([cls_name])
        tools = env.tools
        names = [t["function"]["name"] for t in tools]
        for name in names:
            code = env.source_of(name)
            code_rows.append(
                {"code_ref": code_ref(code), "source": bfcl.SOURCE, "owner": cls_name, "tool": name, "code": code}
            )
        class_code = bfcl.class_source(cls_name)
        code_rows.append(
            {"code_ref": code_ref(class_code), "source": bfcl.SOURCE, "owner": cls_name, "tool": "", "code": class_code}
        )
        envs.append(
            {
                "source": bfcl.SOURCE,
                "env_class": cls_name,
                "license": bfcl.LICENSE,
                "num_tools": len(names),
                "tools": names,
                "tools_json": json.dumps(tools),
                "class_code_ref": code_ref(class_code),
            }
        )
    return envs, code_rows


def build_catalog(layout: DataLayout) -> CatalogReport:
    """Write ``environments.parquet`` and ``tool_code.parquet`` for every known source."""
    envs, code_rows = bfcl_catalog()
    unique_code = {row["code_ref"]: row for row in code_rows}
    write_table(layout.environments, envs, schema.ENVIRONMENTS)
    write_table(layout.tool_code, unique_code.values(), schema.TOOL_CODE)
    return CatalogReport(environments=envs, tools=sum(e["num_tools"] for e in envs))
