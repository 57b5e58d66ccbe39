"""Strata of a labeled step (DESIGN §5): outcome × |Δ| bucket × argument cardinality.

One definition used by exploration (steering), candidate reports, the benchmark composition and
the Balance2 mixture.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.labeling.outcome import ERROR, FAILURE, SUCCESS


def delta_bucket(delta_size: int) -> str:
    """``none`` 0, ``simple`` 1–2, ``medium`` 3–6, ``difficult`` 7–12, ``beyond`` > 12."""
    if delta_size == 0:
        return "none"
    if delta_size <= 2:
        return "simple"
    if delta_size <= 6:
        return "medium"
    if delta_size <= 12:
        return "difficult"
    return "beyond"


@dataclass(frozen=True)
class Cell:
    """A cell of the benchmark composition and its default quota."""

    name: str
    group: str
    quota: int


#: EnvSimBench composition (400 samples)
BENCHMARK_CELLS: tuple[Cell, ...] = (
    Cell("failure", "failure", 20),
    Cell("no_change_args0", "no-change", 40),
    Cell("no_change_args1", "no-change", 40),
    Cell("simple_1", "simple", 25),
    Cell("simple_2", "simple", 25),
    Cell("medium_3", "medium", 50),
    Cell("medium_4", "medium", 50),
    Cell("medium_5", "medium", 50),
    Cell("medium_6", "medium", 50),
    Cell("difficult", "difficult", 50),
)

#: Balance2 SFT mixture groups and default sizes
BALANCE2_GROUPS: dict[str, int] = {"failure": 1000, "no_change": 1000, "simple": 2000, "complex": 2230}


def benchmark_cell(outcome: str, delta_size: int, args_count: int) -> str | None:
    """The benchmark cell a step is a candidate for, or None (errors, beyond, other no-change)."""
    if outcome == FAILURE:
        return "failure" if delta_size == 0 else None
    if outcome != SUCCESS:
        return None
    if delta_size == 0:
        return f"no_change_args{args_count}" if args_count in (0, 1) else None
    if delta_size <= 2:
        return f"simple_{delta_size}"
    if delta_size <= 6:
        return f"medium_{delta_size}"
    if delta_size <= 12:
        return "difficult"
    return None


def balance2_group(outcome: str, delta_size: int) -> str | None:
    """The Balance2 group of a step (error steps and |Δ| > 12 are never used)."""
    if outcome == ERROR or delta_size > 12:
        return None
    if outcome == FAILURE:
        return "failure"
    if delta_size == 0:
        return "no_change"
    return "simple" if delta_size <= 2 else "complex"


#: the same rules in SQL, for scans over the steps table
BENCHMARK_CELL_SQL = """CASE
  WHEN outcome = 'failure' AND delta_size = 0 THEN 'failure'
  WHEN outcome = 'success' AND delta_size = 0 AND args_count IN (0, 1) THEN 'no_change_args' || args_count
  WHEN outcome = 'success' AND delta_size BETWEEN 1 AND 2 THEN 'simple_' || delta_size
  WHEN outcome = 'success' AND delta_size BETWEEN 3 AND 6 THEN 'medium_' || delta_size
  WHEN outcome = 'success' AND delta_size BETWEEN 7 AND 12 THEN 'difficult'
END"""

BALANCE2_GROUP_SQL = """CASE
  WHEN outcome = 'error' OR delta_size > 12 THEN NULL
  WHEN outcome = 'failure' THEN 'failure'
  WHEN delta_size = 0 THEN 'no_change'
  WHEN delta_size <= 2 THEN 'simple'
  ELSE 'complex'
END"""
