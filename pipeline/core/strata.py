"""Strata of a labeled step (docs/definitions.md §5): the benchmark cells and the Balance2 groups over the
stratification axes, and the benchmark composition in force.

:class:`StrataRules` builds every stratum rule from the one |Δ| bucket table (:data:`DELTA_BUCKETS`), as
:class:`~pipeline.core.axes.Rules` that give both the Python labels and the SQL ``CASE``, so a changed threshold
changes both (``tests/core/test_strata_rules.py`` holds them equal). A :class:`Composition` is a value: the profile
gives the default, asset configs may replace it, and every stage takes the one in force.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from functools import cached_property
from typing import Any, Literal

from pipeline.core.axes import (
    ARGS_GROUPED_FROM,
    DELTA_BUCKETS,
    OneOf,
    Range,
    Rule,
    Rules,
    When,
    axis_values,
    bucket_ranges,
    bucket_rules,
    grouped_rules,
    quote,
)
from pipeline.core.fields import setting
from pipeline.core.outcome import EXCLUDED_OUTCOMES, FAILURE, SUCCESS

#: a benchmark cell's outcome (error steps are never selected)
CellOutcome = Literal["success", "failure"]

_OUTCOME, _DELTA, _ARGS = "outcome", "delta_size", "args_count"  # the axis columns the strata rules read


def _when(outcomes: tuple[str, ...] | None = None, delta: Range | None = None, args: Range | None = None) -> When:
    """A predicate over outcome, |Δ| and argument count (None: any)."""
    return When.of(**{_OUTCOME: None if outcomes is None else OneOf(outcomes), _DELTA: delta, _ARGS: args})


@dataclass(frozen=True)
class Cell:
    """A cell of a benchmark composition: which steps qualify (outcome, ``delta_min <= |Δ| <= delta_max``, the
    argument count if set), and how many to pick. The fields are also the ``composition`` resource's ``CellConfig``."""

    name: str = setting(description="Cell name (a sample's stratum).")
    group: str = setting(description="Group the cell reports under (failure, no_change, simple, medium, difficult).")
    quota: int = setting(description="Samples to pick.")
    outcome: CellOutcome = setting(SUCCESS, "Outcome a step must have.")
    delta_min: int = setting(0, "Smallest |Δ| of a qualifying step.")
    delta_max: int = setting(0, "Largest |Δ| of a qualifying step.")
    args_count: int | None = setting(None, "Argument count a step must have (unset: any).")

    @cached_property  # built once per cell: exploration asks it for every step it counts
    def when(self) -> When:
        return _when(
            (self.outcome,),
            Range(self.delta_min, self.delta_max),
            None if self.args_count is None else Range(self.args_count, self.args_count),
        )

    def matches(self, *values: Any, **named: Any) -> bool:
        """Whether a step (its axis values, :func:`~pipeline.core.axes.axis_values`) qualifies."""
        return self.when.matches(axis_values(*values, **named))

    def sql(self) -> str:
        """The cell's rule as a SQL predicate over the steps/strata table."""
        return self.when.sql()

    def to_dict(self) -> dict:
        return asdict(self)


#: EnvSimBench quotas: failure, no_change per argument count, and per |Δ| in the simple / medium
#: buckets (one cell per |Δ|), the whole difficult bucket
_FAILURE_QUOTA, _NO_CHANGE_QUOTA, _SIMPLE_QUOTA, _MEDIUM_QUOTA, _DIFFICULT_QUOTA = 20, 40, 25, 50, 50


class StrataRules:
    """Every stratum rule, generated from one |Δ| bucket table (and the argument grouping)."""

    def __init__(
        self,
        delta_buckets: tuple[tuple[str, int | None], ...] = DELTA_BUCKETS,
        args_grouped_from: int = ARGS_GROUPED_FROM,
    ) -> None:
        ranges = bucket_ranges(delta_buckets)
        self.buckets: dict[str, tuple[int, int | None]] = {name: (r.lo, r.hi) for name, r in ranges.items()}
        if list(self.buckets) != [b for b, _ in DELTA_BUCKETS] or delta_buckets[-1][1] is not None:
            raise ValueError(f"|Δ| buckets must be {[b for b, _ in DELTA_BUCKETS]} in order, the last unbounded")

        def bucket(name: str, outcomes: tuple[str, ...] | None = None) -> When:
            return _when(outcomes, ranges[name])

        simple, medium, difficult = self.buckets["simple"], self.buckets["medium"], self.buckets["difficult"]
        self.delta_bucket = bucket_rules(_DELTA, delta_buckets)
        self.args_cardinality = grouped_rules(_ARGS, args_grouped_from)
        #: the default (EnvSimBench, 400-sample) benchmark composition
        self.benchmark_cells: tuple[Cell, ...] = (
            Cell("failure", "failure", _FAILURE_QUOTA, FAILURE, *self.buckets["none"]),
            *(
                Cell(f"no_change_args{n}", "no_change", _NO_CHANGE_QUOTA, SUCCESS, *self.buckets["none"], n)
                for n in (0, 1)
            ),
            *(Cell(f"simple_{d}", "simple", _SIMPLE_QUOTA, SUCCESS, d, d) for d in range(simple[0], simple[1] + 1)),
            *(Cell(f"medium_{d}", "medium", _MEDIUM_QUOTA, SUCCESS, d, d) for d in range(medium[0], medium[1] + 1)),
            Cell("difficult", "difficult", _DIFFICULT_QUOTA, SUCCESS, *difficult),
        )
        #: the default benchmark cell of a step (errors, beyond and no_change with 2+ arguments: none)
        self.benchmark_cell = Rules(tuple(Rule(c.name, c.when) for c in self.benchmark_cells))
        #: the benchmark group (the default cells' ``group``) of a sample, for evaluation breakdowns:
        #: every failure is ``failure``, |Δ| beyond the difficult bucket counts as ``difficult``
        self.benchmark_group = Rules(
            (
                Rule("failure", _when((FAILURE,))),
                Rule("no_change", bucket("none")),
                Rule("simple", bucket("simple")),
                Rule("medium", bucket("medium")),
                Rule("difficult", _when(delta=Range(difficult[0]))),
            )
        )
        #: the Balance2 group of a step (error steps and |Δ| beyond the difficult bucket: none)
        self.balance2_group = Rules(
            (
                Rule(None, _when(EXCLUDED_OUTCOMES)),
                Rule(None, bucket("beyond")),
                Rule("failure", _when((FAILURE,))),
                Rule("no_change", bucket("none")),
                Rule("simple", bucket("simple")),
                Rule("complex", _when(delta=Range(medium[0], difficult[1]))),
            )
        )


RULES = StrataRules()


def delta_bucket(delta_size: int) -> str:
    """The |Δ| bucket label: ``0``, ``1-2``, ``3-6``, ``7-12``, ``13+`` (:data:`DELTA_BUCKETS`)."""
    return RULES.delta_bucket.label(delta_size=delta_size)


def args_cardinality(args_count: int) -> str:
    """Argument-count stratum: ``0``, ``1``, ``2``, ``3+``."""
    return RULES.args_cardinality.label(args_count=args_count)


def benchmark_cell(outcome: str, delta_size: int, args_count: int) -> str | None:
    """The default benchmark cell a step is a candidate for, or None (errors, beyond, other no_change)."""
    return RULES.benchmark_cell.label(outcome, delta_size, args_count)


def balance2_group(outcome: str, delta_size: int) -> str | None:
    """The Balance2 group of a step (error steps and |Δ| > 12 are never used)."""
    return RULES.balance2_group.label(outcome, delta_size)


def benchmark_group(outcome: str, delta_size: int) -> str:
    """The benchmark group of a sample (evaluation breakdowns)."""
    return RULES.benchmark_group.label(outcome, delta_size)


#: the same rules in SQL, for scans over the steps / strata table (generated from :data:`RULES`)
BENCHMARK_CELL_SQL = RULES.benchmark_cell.sql()
BALANCE2_GROUP_SQL = RULES.balance2_group.sql()
BENCHMARK_GROUP_SQL = RULES.benchmark_group.sql()
BEYOND_SQL = _when(delta=Range(*RULES.buckets["beyond"])).sql()  # |Δ| beyond the difficult bucket: never selected

#: EnvSimBench composition (400 samples)
BENCHMARK_CELLS: tuple[Cell, ...] = RULES.benchmark_cells

#: Balance2 SFT mixture groups and default sizes
BALANCE2_GROUPS: dict[str, int] = {"failure": 1000, "no_change": 1000, "simple": 2000, "complex": 2230}


@dataclass(frozen=True)
class Composition:
    """What the splits are built to: benchmark cells (rule + quota) and Balance2 mixture sizes."""

    cells: tuple[Cell, ...] = BENCHMARK_CELLS
    mixture_sizes: Mapping[str, int] = field(default_factory=lambda: dict(BALANCE2_GROUPS))

    def __post_init__(self) -> None:
        object.__setattr__(self, "cells", tuple(self.cells))
        object.__setattr__(self, "mixture_sizes", dict(self.mixture_sizes))
        names = [c.name for c in self.cells]
        if len(set(names)) != len(names):
            raise ValueError(
                f"composition cell names must be unique: {sorted({n for n in names if names.count(n) > 1})}"
            )
        unknown = set(self.mixture_sizes) - set(BALANCE2_GROUPS)
        if unknown:
            raise ValueError(f"unknown Balance2 group(s) {sorted(unknown)}; known: {list(BALANCE2_GROUPS)}")

    @property
    def benchmark_size(self) -> int:
        return sum(c.quota for c in self.cells)

    def cells_of(self, *values: Any, **named: Any) -> list[str]:
        """Every cell a step (its axis values: :func:`~pipeline.core.axes.axis_values`) is a candidate for
        (cells of a custom composition may overlap)."""
        step = axis_values(*values, **named)
        return [c.name for c in self.cells if c.when.matches(step)]

    def cells_sql(self) -> str:
        """SQL: per step, a list with each cell's name where the step is a candidate for it and NULL
        where not (``unnest`` it and drop the NULLs to count per cell)."""
        return "[" + ", ".join(f"CASE WHEN {c.sql()} THEN {quote(c.name)} END" for c in self.cells) + "]::VARCHAR[]"
