"""Markdown tables and record lists used in asset metadata, dataset cards and the CLI report,
and the plain shape of what a stage reports (:class:`Facts`: values, :class:`Table`, :class:`Markdown`).

Every cell, header and key goes through :func:`pipeline.core.untrusted.md`: ids come from
untrusted corpora, and no value may end a row, open a link or inject HTML."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pipeline.core.untrusted import md

if TYPE_CHECKING:
    import pandas as pd


def md_table(df: pd.DataFrame, index: bool = True) -> str:
    if df.empty:
        return "_(empty)_"
    from pandas.api.types import is_bool_dtype, is_numeric_dtype

    df = df.copy()
    for column in df.columns:
        if not (is_numeric_dtype(df[column]) or is_bool_dtype(df[column])):
            df[column] = df[column].map(lambda v: v if v is None or isinstance(v, (int, float)) else md(v))
    df.columns = [md(c) for c in df.columns]
    if not is_numeric_dtype(df.index):
        df.index = [md(i) for i in df.index]
    df.index.name = md(df.index.name) if df.index.name is not None else None
    return df.to_markdown(index=index)


def md_records(rows: Iterable[Mapping[str, Any]], columns: list[str], limit: int = 50) -> str:
    """A Markdown table of ``columns`` of the first ``limit`` rows (no pandas: used on hot paths)."""
    rows = list(rows)
    if not rows:
        return "_none_"
    lines = ["| " + " | ".join(md(c) for c in columns) + " |", "|" + "|".join(":---" for _ in columns) + "|"]
    lines += ["| " + " | ".join(md(r.get(c)) for c in columns) + " |" for r in rows[:limit]]
    more = f"\n\n… and {len(rows) - limit} more" if len(rows) > limit else ""
    return "\n".join(lines) + more


@dataclass(frozen=True)
class Table:
    """A table for a report (the Dagster layer shows it as table metadata): ``rows`` of ``columns``."""

    rows: list[dict[str, Any]]
    columns: list[str]

    @classmethod
    def of_frame(cls, df: pd.DataFrame) -> Table:
        """A DataFrame's rows (its index left out) under its column names as strings."""
        df = df.set_axis([str(c) for c in df.columns], axis=1)
        return cls(df.to_dict("records"), list(df.columns))


@dataclass(frozen=True)
class Markdown:
    """Markdown text for a report (escaped by whoever wrote it: :func:`pipeline.core.untrusted.md`)."""

    text: str


@dataclass
class Facts:
    """What a stage reports, without Dagster: named values (plain values, a :class:`Table`, :class:`Markdown`
    or a ``Path``) in the order shown, and the warnings to log. ``assets.metadata.metadata_of`` turns the
    values into asset metadata."""

    values: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def __getitem__(self, name: str) -> Any:
        return self.values[name]
