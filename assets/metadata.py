"""Dagster metadata from the pipeline's tables: table metadata with a column schema (a table in the UI, not pipe
text), and a Parquet-backed asset's ``dagster/row_count`` / ``dagster/column_schema`` from the files' footers; every
column with its glossary description (:func:`pipeline.store.catalog.column_description`) for the UI's Columns table."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from dagster import AssetCheckResult, MaterializeResult, MetadataValue, TableColumn, TableRecord, TableSchema

from pipeline.report.tables import Facts, Markdown, Table
from pipeline.store import catalog

#: rows shown in a metadata table (the data itself is in Parquet / DuckDB)
MAX_ROWS = 200


#: a metadata table column's type: the first whose Python types hold every value of the column, else string
_CELL_TYPES = (("bool", {bool}), ("int", {int}), ("float", {int, float}))


def _column_type(values: Iterable[Any]) -> str:
    kinds = {type(v) for v in values if v is not None}
    return next((name for name, types in _CELL_TYPES if kinds and kinds <= types), "string")


def _cell(value: Any) -> str | int | float | bool | None:
    if value is None:
        return None
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):  # numpy / pandas scalars
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def _schema(columns: Iterable[tuple[str, str]], table: str = "") -> TableSchema:
    """The column schema of ``(name, type)`` pairs, each column with its description (``table``: the DuckDB table /
    view, for table-specific meanings)."""
    return TableSchema(
        columns=[TableColumn(name=n, type=t, description=catalog.column_description(table, n)) for n, t in columns]
    )


_ARROW_TYPES = (
    (pa.types.is_boolean, "bool"),
    (pa.types.is_integer, "int"),
    (pa.types.is_floating, "float"),
    (pa.types.is_string, "string"),
    (pa.types.is_large_string, "string"),
    (pa.types.is_timestamp, "timestamp"),
    (pa.types.is_list, "list"),
    (pa.types.is_struct, "struct"),
)


def _arrow_type(dtype: pa.DataType) -> str:
    return next((name for test, name in _ARROW_TYPES if test(dtype)), str(dtype))


def parquet_metadata(files: Sequence[str | Path], table: str = "") -> dict[str, Any]:
    """``dagster/row_count`` and ``dagster/column_schema`` of Parquet ``files`` (footers only); each column with
    its description (``table``: the DuckDB table / view the files are, for table-specific meanings)."""
    files = [str(f) for f in files]
    if not files:
        return {"dagster/row_count": 0}
    rows = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
    columns = _schema(((f.name, _arrow_type(f.type)) for f in pq.read_schema(files[0])), table)
    return {"dagster/row_count": rows, "dagster/column_schema": columns}


def metadata_of(values: Mapping[str, Any]) -> dict[str, Any]:
    """Asset metadata of a stage's :class:`~pipeline.report.tables.Facts` values: a ``Table`` as table metadata,
    ``Markdown`` as Markdown, a ``Path`` as a path, a dict as JSON, any other value as it is."""

    def one(value: Any) -> Any:
        if isinstance(value, Table):  # its first MAX_ROWS rows
            body = [{c: _cell(r.get(c)) for c in value.columns} for r in list(value.rows)[:MAX_ROWS]]
            schema = _schema((str(c), _column_type(r[c] for r in body)) for c in value.columns)
            return MetadataValue.table(records=[TableRecord(r) for r in body], schema=schema)
        if isinstance(value, Markdown):
            return MetadataValue.md(value.text)
        if isinstance(value, Path):
            return MetadataValue.path(str(value))
        if isinstance(value, dict):
            return MetadataValue.json(value)
        return value

    return {name: one(value) for name, value in values.items()}


def materialize(
    context: Any, facts: Facts, metadata: Mapping[str, Any] | None = None, **result: Any
) -> MaterializeResult:
    """The one way a stage's report becomes an asset's result: its warnings logged, its values as metadata (then
    ``metadata``: what only the asset knows, e.g. the Parquet files' column schema), ``result`` passed on
    (``data_version``, ``check_results``)."""
    return MaterializeResult(metadata=_logged(context.log.warning, facts, metadata), **result)


def check_result(
    context: Any, facts: Facts, metadata: Mapping[str, Any] | None = None, strict: bool = False, **result: Any
) -> AssetCheckResult:
    """:func:`materialize` for an asset check, the one way a check's verdict is built (its warnings logged as
    errors when ``strict``); ``result``: ``passed``, ``severity``, ``description``, and ``check_name`` for a check
    an asset answers itself (its ``check_specs``)."""
    return AssetCheckResult(
        metadata=_logged(context.log.error if strict else context.log.warning, facts, metadata), **result
    )


def _logged(log: Any, facts: Facts, metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    for line in facts.warnings:
        log(line)
    return {**metadata_of(facts.values), **(metadata or {})}
