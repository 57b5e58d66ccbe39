"""Strata of a labeled step (DESIGN §5): outcome × |Δ| bucket × argument cardinality.

One definition used by exploration (steering), candidate reports, the benchmark composition and
the Balance2 mixture.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.core.outcome import ERROR, FAILURE, SUCCESS


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
    """A cell of a benchmark composition: which steps qualify, and how many to pick.

    A step qualifies when its outcome matches, ``delta_min <= |Δ| <= delta_max`` and (if set) its
    argument count equals ``args_count``.
    """

    name: str
    group: str
    quota: int
    outcome: str = SUCCESS
    delta_min: int = 0
    delta_max: int = 0
    args_count: int | None = None

    def sql(self) -> str:
        """The cell's rule as a SQL predicate over the steps/strata table."""
        cond = [f"outcome = '{self.outcome}'", f"delta_size BETWEEN {int(self.delta_min)} AND {int(self.delta_max)}"]
        if self.args_count is not None:
            cond.append(f"args_count = {int(self.args_count)}")
        return " AND ".join(cond)

    def to_dict(self) -> dict:
        return {"name": self.name, "group": self.group, "quota": self.quota, "outcome": self.outcome,
                "delta_min": self.delta_min, "delta_max": self.delta_max, "args_count": self.args_count}


#: EnvSimBench composition (400 samples)
BENCHMARK_CELLS: tuple[Cell, ...] = (
    Cell("failure", "failure", 20, FAILURE, 0, 0),
    Cell("no_change_args0", "no-change", 40, SUCCESS, 0, 0, 0),
    Cell("no_change_args1", "no-change", 40, SUCCESS, 0, 0, 1),
    Cell("simple_1", "simple", 25, SUCCESS, 1, 1),
    Cell("simple_2", "simple", 25, SUCCESS, 2, 2),
    Cell("medium_3", "medium", 50, SUCCESS, 3, 3),
    Cell("medium_4", "medium", 50, SUCCESS, 4, 4),
    Cell("medium_5", "medium", 50, SUCCESS, 5, 5),
    Cell("medium_6", "medium", 50, SUCCESS, 6, 6),
    Cell("difficult", "difficult", 50, SUCCESS, 7, 12),
)

#: Balance2 SFT mixture groups and default sizes
BALANCE2_GROUPS: dict[str, int] = {"failure": 1000, "no_change": 1000, "simple": 2000, "complex": 2230}


def args_cardinality(args_count: int) -> str:
    """Argument-count stratum: ``0``, ``1``, ``2``, ``3+``."""
    return str(args_count) if args_count < 3 else "3+"


DELTA_BUCKET_SQL = """CASE WHEN delta_size = 0 THEN 'none' WHEN delta_size <= 2 THEN 'simple'
  WHEN delta_size <= 6 THEN 'medium' WHEN delta_size <= 12 THEN 'difficult' ELSE 'beyond' END"""
ARGS_CARDINALITY_SQL = "CASE WHEN args_count < 3 THEN CAST(args_count AS VARCHAR) ELSE '3+' END"


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
