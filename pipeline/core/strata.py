"""Strata of a labeled step (docs/definitions.md §5): outcome × |Δ| bucket × argument cardinality, the benchmark
cells and the Balance2 groups — and the benchmark composition in force.

One table of rules: :data:`DELTA_BUCKETS` holds the |Δ| thresholds (0 / 2 / 6 / 12), written once.
Every stratum rule is a list of :class:`Rule` (a :class:`When` predicate over outcome, |Δ| and
argument count, and the label it gives; the first matching rule wins) from which *both* the Python
function (:meth:`Rules.label`) and the SQL ``CASE`` expression over the steps / strata table
(:meth:`Rules.sql`) are generated; ``tests/core/test_strata_rules.py`` holds them equal on every
combination. :class:`StrataRules` builds all of them from a bucket table, so a changed threshold
changes the Python and the SQL together.

A :class:`Composition` (benchmark cells with their quotas, Balance2 mixture sizes) is a value: the
profile gives the default (``pipeline.core.profile``), asset configs may replace it, and exploration
targets, coverage reports, asset metadata, checks and the summary all take the one in force.
"""

from __future__ import annotations

import string
from dataclasses import asdict, dataclass, field
from functools import cached_property
from typing import Literal, Mapping

from pipeline.core.fields import setting
from pipeline.core.outcome import ERROR, FAILURE, SUCCESS

#: |Δ| buckets, in order: (role, largest |Δ| in the bucket); the last one is unbounded.
#: The only place the thresholds are written. A role names what the bucket feeds (the benchmark group
#: or Balance2 group of the same word); the bucket's *label* — what ``delta_bucket`` columns hold — is
#: its |Δ| range (``0``, ``1-2``, ``3-6``, ``7-12``, ``13+``), so a bucket label is never a cell or
#: group name (one vocabulary: docs/definitions.md §5).
DELTA_BUCKETS: tuple[tuple[str, int | None], ...] = (
    ("none", 0), ("simple", 2), ("medium", 6), ("difficult", 12), ("beyond", None))
#: argument counts from this one on share the stratum ``3+``
ARGS_GROUPED_FROM = 3

#: a benchmark cell's outcome (error steps are never selected)
CellOutcome = Literal["success", "failure"]


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _range_sql(column: str, lo: int, hi: int | None) -> list[str]:
    if hi is not None and lo == hi:
        return [f"{column} = {int(lo)}"]
    out = [f"{column} >= {int(lo)}"] if lo > 0 else []
    return out + ([f"{column} <= {int(hi)}"] if hi is not None else [])


def bucket_label(lo: int, hi: int | None) -> str:
    """A |Δ| bucket's label: its range (``0``, ``1-2``, ``13+``)."""
    return f"{lo}+" if hi is None else str(lo) if lo == hi else f"{lo}-{hi}"


def _in_range(value: int, lo: int, hi: int | None) -> bool:
    """As :func:`_range_sql` writes it: a lower bound of 0 is no bound (|Δ| and argument counts are
    never negative) unless the range is one value."""
    if hi is not None and lo == hi:
        return value == lo
    return (lo <= 0 or value >= lo) and (hi is None or value <= hi)


@dataclass(frozen=True)
class When:
    """A predicate over a step: ``outcome`` in ``outcomes`` (None: any), ``delta_min <= |Δ| <=
    delta_max`` and ``args_min <= args_count <= args_max`` (None: unbounded)."""

    outcomes: tuple[str, ...] | None = None
    delta_min: int = 0
    delta_max: int | None = None
    args_min: int = 0
    args_max: int | None = None

    def matches(self, outcome: str | None, delta_size: int, args_count: int) -> bool:
        return ((self.outcomes is None or outcome in self.outcomes)
                and _in_range(delta_size, self.delta_min, self.delta_max)
                and _in_range(args_count, self.args_min, self.args_max))

    def sql(self) -> str:
        cond = []
        if self.outcomes is not None:
            cond.append(f"outcome = {_quote(self.outcomes[0])}" if len(self.outcomes) == 1
                        else f"outcome IN ({', '.join(_quote(o) for o in self.outcomes)})")
        cond += _range_sql("delta_size", self.delta_min, self.delta_max)
        cond += _range_sql("args_count", self.args_min, self.args_max)
        return " AND ".join(cond) or "true"


#: placeholders a label may use, and the column each reads
_FIELDS = {"delta": "delta_size", "args": "args_count"}


@dataclass(frozen=True)
class Rule:
    """``label`` for a step that matches ``when``: a text that may hold ``{delta}`` / ``{args}``, or
    None (the step has no label)."""

    label: str | None
    when: When = When()

    def render(self, delta_size: int, args_count: int) -> str | None:
        return None if self.label is None else self.label.format(delta=delta_size, args=args_count)

    def label_sql(self) -> str:
        if self.label is None:
            return "NULL"
        parts = []
        for literal, name, _, _ in string.Formatter().parse(self.label):
            if literal:
                parts.append(_quote(literal))
            if name is not None:
                if name not in _FIELDS:
                    raise ValueError(f"rule label {self.label!r}: unknown placeholder {{{name}}}; known: {sorted(_FIELDS)}")
                parts.append(f"CAST({_FIELDS[name]} AS VARCHAR)")
        return " || ".join(parts) or "''"


@dataclass(frozen=True)
class Rules:
    """An ordered rule list: the first matching rule gives the label; no match gives None (NULL)."""

    rules: tuple[Rule, ...]

    def label(self, outcome: str | None = None, delta_size: int = 0, args_count: int = 0) -> str | None:
        for rule in self.rules:
            if rule.when.matches(outcome, delta_size, args_count):
                return rule.render(delta_size, args_count)
        return None

    def sql(self) -> str:
        """The same rules as a SQL ``CASE`` over columns ``outcome``, ``delta_size``, ``args_count``."""
        whens = "\n  ".join(f"WHEN {r.when.sql()} THEN {r.label_sql()}" for r in self.rules)
        return f"CASE\n  {whens}\nEND"


@dataclass(frozen=True)
class Cell:
    """A cell of a benchmark composition: which steps qualify, and how many to pick.

    A step qualifies when its outcome matches, ``delta_min <= |Δ| <= delta_max`` and (if set) its
    argument count equals ``args_count``. The fields (and defaults) are also the ``CellConfig`` of
    the ``composition`` resource.
    """

    name: str = setting(description="Cell name (a sample's stratum).")
    group: str = setting(description="Group the cell reports under (failure, no_change, simple, medium, difficult).")
    quota: int = setting(description="Samples to pick.")
    outcome: CellOutcome = setting(SUCCESS, "Outcome a step must have.")
    delta_min: int = setting(0, "Smallest |Δ| of a qualifying step.")
    delta_max: int = setting(0, "Largest |Δ| of a qualifying step.")
    args_count: int | None = setting(None, "Argument count a step must have (unset: any).")

    @cached_property  # built once per cell: exploration asks it for every step it counts
    def when(self) -> When:
        return When((self.outcome,), self.delta_min, self.delta_max,
                    *((0, None) if self.args_count is None else (self.args_count, self.args_count)))

    def matches(self, outcome: str, delta_size: int, args_count: int) -> bool:
        return self.when.matches(outcome, delta_size, args_count)

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

    def __init__(self, delta_buckets: tuple[tuple[str, int | None], ...] = DELTA_BUCKETS,
                 args_grouped_from: int = ARGS_GROUPED_FROM) -> None:
        self.buckets: dict[str, tuple[int, int | None]] = {}
        lo = 0
        for name, hi in delta_buckets:
            self.buckets[name] = (lo, hi)
            lo = (hi if hi is not None else lo) + 1
        if list(self.buckets) != [b for b, _ in DELTA_BUCKETS] or delta_buckets[-1][1] is not None:
            raise ValueError(f"|Δ| buckets must be {[b for b, _ in DELTA_BUCKETS]} in order, the last unbounded")

        def bucket(name: str, outcomes: tuple[str, ...] | None = None) -> When:
            return When(outcomes, *self.buckets[name])

        simple, medium, difficult = self.buckets["simple"], self.buckets["medium"], self.buckets["difficult"]
        self.delta_bucket = Rules(tuple(Rule(bucket_label(*self.buckets[name]), bucket(name)) for name in self.buckets))
        self.args_cardinality = Rules((Rule("{args}", When(args_max=args_grouped_from - 1)),
                                       Rule(f"{args_grouped_from}+", When(args_min=args_grouped_from))))
        #: the default (EnvSimBench, 400-sample) benchmark composition
        self.benchmark_cells: tuple[Cell, ...] = (
            Cell("failure", "failure", _FAILURE_QUOTA, FAILURE, *self.buckets["none"]),
            *(Cell(f"no_change_args{n}", "no_change", _NO_CHANGE_QUOTA, SUCCESS, *self.buckets["none"], n) for n in (0, 1)),
            *(Cell(f"simple_{d}", "simple", _SIMPLE_QUOTA, SUCCESS, d, d) for d in range(simple[0], simple[1] + 1)),
            *(Cell(f"medium_{d}", "medium", _MEDIUM_QUOTA, SUCCESS, d, d) for d in range(medium[0], medium[1] + 1)),
            Cell("difficult", "difficult", _DIFFICULT_QUOTA, SUCCESS, *difficult),
        )
        #: the default benchmark cell of a step (errors, beyond and no_change with 2+ arguments: none)
        self.benchmark_cell = Rules(tuple(Rule(c.name, c.when) for c in self.benchmark_cells))
        #: the benchmark group (the default cells' ``group``) of a sample, for evaluation breakdowns:
        #: every failure is ``failure``, |Δ| beyond the difficult bucket counts as ``difficult``
        self.benchmark_group = Rules((
            Rule("failure", When((FAILURE,))), Rule("no_change", bucket("none")), Rule("simple", bucket("simple")),
            Rule("medium", bucket("medium")), Rule("difficult", When(delta_min=difficult[0]))))
        #: the Balance2 group of a step (error steps and |Δ| beyond the difficult bucket: none)
        self.balance2_group = Rules((
            Rule(None, When((ERROR,))), Rule(None, bucket("beyond")), Rule("failure", When((FAILURE,))),
            Rule("no_change", bucket("none")), Rule("simple", bucket("simple")),
            Rule("complex", When(delta_min=medium[0], delta_max=difficult[1]))))

    def beyond_sql(self) -> str:
        """SQL predicate: |Δ| beyond the difficult bucket (never selected)."""
        return When(None, *self.buckets["beyond"]).sql()


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
DELTA_BUCKET_SQL = RULES.delta_bucket.sql()
ARGS_CARDINALITY_SQL = RULES.args_cardinality.sql()
BENCHMARK_CELL_SQL = RULES.benchmark_cell.sql()
BALANCE2_GROUP_SQL = RULES.balance2_group.sql()
BENCHMARK_GROUP_SQL = RULES.benchmark_group.sql()
BEYOND_SQL = RULES.beyond_sql()

#: EnvSimBench composition (400 samples)
BENCHMARK_CELLS: tuple[Cell, ...] = RULES.benchmark_cells

#: Balance2 SFT mixture groups and default sizes
BALANCE2_GROUPS: dict[str, int] = {"failure": 1000, "no_change": 1000, "simple": 2000, "complex": 2230}


@dataclass(frozen=True)
class Composition:
    """What the splits are built to: benchmark cells (rule + quota) and Balance2 mixture sizes.

    Exploration steers toward it, the coverage reports, asset metadata and the summary count
    against it, and the benchmark / mixture are built from it."""

    cells: tuple[Cell, ...] = BENCHMARK_CELLS
    mixture_sizes: Mapping[str, int] = field(default_factory=lambda: dict(BALANCE2_GROUPS))

    def __post_init__(self) -> None:
        object.__setattr__(self, "cells", tuple(self.cells))
        object.__setattr__(self, "mixture_sizes", dict(self.mixture_sizes))
        names = [c.name for c in self.cells]
        if len(set(names)) != len(names):
            raise ValueError(f"composition cell names must be unique: {sorted({n for n in names if names.count(n) > 1})}")
        unknown = set(self.mixture_sizes) - set(BALANCE2_GROUPS)
        if unknown:
            raise ValueError(f"unknown Balance2 group(s) {sorted(unknown)}; known: {list(BALANCE2_GROUPS)}")

    @property
    def benchmark_size(self) -> int:
        return sum(c.quota for c in self.cells)

    def cells_of(self, outcome: str, delta_size: int, args_count: int) -> list[str]:
        """Every cell a step is a candidate for (cells of a custom composition may overlap)."""
        return [c.name for c in self.cells if c.matches(outcome, delta_size, args_count)]

    def cells_sql(self) -> str:
        """SQL: per step, a list with each cell's name where the step is a candidate for it and NULL
        where not (``unnest`` it and drop the NULLs to count per cell)."""
        return "[" + ", ".join(f"CASE WHEN {c.sql()} THEN {_quote(c.name)} END" for c in self.cells) + "]::VARCHAR[]"
