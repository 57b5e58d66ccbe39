"""Human-readable summaries (Markdown) used in asset metadata and the CLI report."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Mapping

if TYPE_CHECKING:
    import pandas as pd


def md_table(df: "pd.DataFrame", index: bool = True) -> str:
    if df.empty:
        return "_(empty)_"
    return df.to_markdown(index=index)


def md_records(rows: Iterable[Mapping[str, Any]], columns: list[str], limit: int = 50) -> str:
    """A Markdown table of ``columns`` of the first ``limit`` rows (no pandas: used on hot paths)."""
    rows = list(rows)
    if not rows:
        return "_none_"

    def cell(value: Any) -> str:
        return "" if value is None else str(value).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join(":---" for _ in columns) + "|"]
    lines += ["| " + " | ".join(cell(r.get(c)) for c in columns) + " |" for r in rows[:limit]]
    more = f"\n\n… and {len(rows) - limit} more" if len(rows) > limit else ""
    return "\n".join(lines) + more


def md_histogram(counts: Mapping[Any, int], label: str = "value", width: int = 40) -> str:
    """A Markdown table with a bar per row — quicker to read than numbers alone."""
    if not counts:
        return "_(empty)_"
    peak = max(counts.values()) or 1
    lines = [f"| {label} | count | |", "|---:|---:|:---|"]
    for key, n in counts.items():
        bar = "█" * max(1 if n else 0, round(width * n / peak))
        lines.append(f"| {key} | {n} | {bar} |")
    return "\n".join(lines)
