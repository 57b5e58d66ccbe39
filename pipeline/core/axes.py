"""The stratification axes as data (docs/definitions.md §5): one :class:`Axis` record per axis, and
:data:`AXES`, the axes in force (outcome, |Δ|, argument count), from which every axis column, breakdown,
expectation and description is generated; adding one is ``with_axis(Axis(...))`` (docs/extending.md).

A :class:`When` holds one condition per column (:class:`OneOf` a closed set, :class:`Range` an inclusive integer
range), a :class:`Rule` gives a label where its ``When`` holds, and :class:`Rules` (first match wins) generate both
the Python labelling and the SQL ``CASE``.
"""

from __future__ import annotations

import itertools
import string
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pipeline.core.outcome import OUTCOMES

OUTCOME_COLUMN = "outcome"  # the outcome axis' column (its closed set: OUTCOMES)


def quote(text: str) -> str:
    """A SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


# -- conditions ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Range:
    """``lo <= value <= hi`` (``hi`` None: unbounded); a lower bound of 0 is no bound unless the range is one value."""

    lo: int = 0
    hi: int | None = None

    def matches(self, value: int) -> bool:
        if self.hi is not None and self.lo == self.hi:
            return value == self.lo
        return (self.lo <= 0 or value >= self.lo) and (self.hi is None or value <= self.hi)

    def sql(self, column: str) -> list[str]:
        if self.hi is not None and self.lo == self.hi:
            return [f"{column} = {int(self.lo)}"]
        out = [f"{column} >= {int(self.lo)}"] if self.lo > 0 else []
        return out + ([f"{column} <= {int(self.hi)}"] if self.hi is not None else [])


@dataclass(frozen=True)
class OneOf:
    """``value`` in a closed set of texts."""

    values: tuple[str, ...]

    def matches(self, value: Any) -> bool:
        return value in self.values

    def sql(self, column: str) -> list[str]:
        if len(self.values) == 1:
            return [f"{column} = {quote(self.values[0])}"]
        return [f"{column} IN ({', '.join(quote(v) for v in self.values)})"]


Condition = Range | OneOf


@dataclass(frozen=True)
class When:
    """A predicate over a step: every ``(column, condition)`` holds (none: always true)."""

    conditions: tuple[tuple[str, Condition], ...] = ()

    @classmethod
    def of(cls, **conditions: Condition | None) -> When:
        """``When.of(outcome=OneOf(("success",)), delta_size=Range(1, 2))``; a None condition is left out."""
        return cls(tuple((column, c) for column, c in conditions.items() if c is not None))

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(column for column, _ in self.conditions)

    def matches(self, values: Mapping[str, Any]) -> bool:
        for column, condition in self.conditions:
            if column not in values:
                raise KeyError(
                    f"a stratum rule reads column {column!r}, which the step's values lack: {sorted(values)}"
                )
            if not condition.matches(values[column]):
                return False
        return True

    def sql(self) -> str:
        return " AND ".join(part for column, c in self.conditions for part in c.sql(column)) or "true"


@dataclass(frozen=True)
class Rule:
    """``label`` for a step that matches ``when``: a text that may hold ``{column}`` placeholders, or None."""

    label: str | None
    when: When = When()

    def render(self, values: Mapping[str, Any]) -> str | None:
        return None if self.label is None else self.label.format_map(values)

    def label_sql(self) -> str:
        if self.label is None:
            return "NULL"
        parts = []
        for literal, name, _, _ in string.Formatter().parse(self.label):
            if literal:
                parts.append(quote(literal))
            if name is not None:
                if not name.isidentifier():
                    raise ValueError(f"rule label {self.label!r}: placeholder {{{name}}} is not a column name")
                parts.append(f"CAST({name} AS VARCHAR)")
        return " || ".join(parts) or "''"


def axis_values(*positional: Any, **named: Any) -> Mapping[str, Any]:
    """A step's axis values keyed by column: one mapping (used as it is), values in :data:`AXES`' order, keywords."""
    if len(positional) == 1 and isinstance(positional[0], Mapping):
        return {**positional[0], **named} if named else positional[0]
    columns = AXES.columns
    if len(positional) > len(columns):
        raise TypeError(f"at most {len(columns)} positional axis values ({', '.join(columns)}), got {len(positional)}")
    return {**dict(zip(columns, positional)), **named}


@dataclass(frozen=True)
class Rules:
    """An ordered rule list: the first matching rule gives the label; no match gives None (NULL)."""

    rules: tuple[Rule, ...]

    def label(self, *values: Any, **named: Any) -> str | None:
        """The label of a step given by its axis values (:func:`axis_values`)."""
        step = axis_values(*values, **named)
        return next((rule.render(step) for rule in self.rules if rule.when.matches(step)), None)

    def points(self, column: str) -> tuple[int, ...]:
        """Integer values of ``column`` that meet every label the rules give on it: 0 to past the largest bound."""
        bounds = {0}
        for rule in self.rules:
            for name, condition in rule.when.conditions:
                if name == column and isinstance(condition, Range):
                    bounds.update(b for b in (condition.lo, condition.hi) if b is not None)
        return tuple(range(max(bounds) + 2))  # 0 to one past the largest bound

    def label_values(self, domains: Mapping[str, Iterable[Any]] | None = None) -> tuple[str, ...]:
        """Every label the rules give — the closed set a label column holds — in rule order (a placeholder
        rule's labels in value order). ``domains`` gives the values of the closed-set (:class:`OneOf`) columns;
        integer columns run over :meth:`points`."""
        domains = dict(domains or {})
        columns = list(dict.fromkeys(c for r in self.rules for c in r.when.columns))
        for column in columns:
            if column not in domains:
                sets = [
                    c.values for r in self.rules for n, c in r.when.conditions if n == column and isinstance(c, OneOf)
                ]
                domains[column] = tuple(dict.fromkeys(v for s in sets for v in s)) if sets else self.points(column)
        out: dict[str, tuple[int, int]] = {}  # label -> (index of the rule that gives it first, appearance)
        for combo in itertools.product(*(tuple(domains[c]) for c in columns)):
            step = dict(zip(columns, combo))
            index = next((i for i, r in enumerate(self.rules) if r.when.matches(step)), None)
            label = None if index is None else self.rules[index].render(step)
            if label is not None and label not in out:
                out[label] = (index, len(out))
        return tuple(sorted(out, key=out.__getitem__))

    def sql(self) -> str:
        """The same rules as a SQL ``CASE`` over the columns the conditions name."""
        whens = "\n  ".join(f"WHEN {r.when.sql()} THEN {r.label_sql()}" for r in self.rules)
        return f"CASE\n  {whens}\nEND"


# -- buckets ---------------------------------------------------------------------------------------------

#: |Δ| buckets, in order: (role, largest |Δ| in the bucket; the last unbounded), the only place the thresholds
#: are written. A role names the group the bucket feeds; its label (``delta_bucket``) is its range (``1-2``).
DELTA_BUCKETS: tuple[tuple[str, int | None], ...] = (
    ("none", 0),
    ("simple", 2),
    ("medium", 6),
    ("difficult", 12),
    ("beyond", None),
)
#: argument counts from this one on share the stratum ``3+``
ARGS_GROUPED_FROM = 3


def bucket_label(lo: int, hi: int | None) -> str:
    """A bucket's label: its range (``0``, ``1-2``, ``13+``)."""
    return f"{lo}+" if hi is None else str(lo) if lo == hi else f"{lo}-{hi}"


def bucket_ranges(table: tuple[tuple[str, int | None], ...]) -> dict[str, Range]:
    """A bucket table (role, largest value) -> role -> its :class:`Range` (each starts after the previous)."""
    out: dict[str, Range] = {}
    lo = 0
    for name, hi in table:
        out[name] = Range(lo, hi)
        lo = (hi if hi is not None else lo) + 1
    return out


def bucket_rules(column: str, table: tuple[tuple[str, int | None], ...]) -> Rules:
    """Rules labelling ``column`` by the bucket of ``table`` it falls in (labels: the ranges)."""
    return Rules(tuple(Rule(bucket_label(r.lo, r.hi), When.of(**{column: r})) for r in bucket_ranges(table).values()))


def grouped_rules(column: str, grouped_from: int) -> Rules:
    """Rules labelling ``column`` by its value, values from ``grouped_from`` on sharing ``<grouped_from>+``."""
    return Rules(
        (
            Rule("{" + column + "}", When.of(**{column: Range(0, grouped_from - 1)})),
            Rule(f"{grouped_from}+", When.of(**{column: Range(grouped_from)})),
        )
    )


# -- the axis record -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Axis:
    """One stratification axis: its value column, its label column and rules, its breakdowns and expectations."""

    #: the axis' name (``eval_by_<name>`` / ``rollout_by_<name>`` views)
    name: str
    #: the column holding a step's value (step table, strata, samples, evaluation results)
    column: str
    #: the value's DuckDB type
    sql_type: str
    #: SQL computing the value from a step (or evaluation result) row; None: the value is the stored ``column``
    value_sql: str | None = None
    #: the value from a step record (a mapping of step columns); None: ``record[column]``
    extract: Callable[[Mapping[str, Any]], Any] | None = field(default=None, compare=False)
    #: the label (bucket) column and the rules that give it from the axis values; None: the value is the label
    label: str | None = None
    rules: Rules | None = None
    #: the label column's meaning (comments, dataset card); the glossary appends the labels the rules give
    label_doc: str | None = None
    #: quality expectations on the step table: the closed set of values, the smallest value
    values: tuple[str, ...] | None = None
    min_value: int | None = None
    #: evaluation breaks down by the value (``eval_by_<name>``) / by the label (``eval_results_strata``)
    by_value: bool = False
    by_label: bool = False

    def __post_init__(self) -> None:
        if (self.label is None) != (self.rules is None):
            raise ValueError(f"axis {self.name!r}: a label column needs rules and rules need a label column")

    @property
    def stored(self) -> bool:
        """Whether the step table holds the value (else it is computed by ``value_sql``)."""
        return self.value_sql is None

    @property
    def key(self) -> str:
        """The column a step's stratum reads on this axis: the label, or the value where there is none."""
        return self.label or self.column

    def value(self, record: Mapping[str, Any]) -> Any:
        """The axis value of a step record."""
        return self.extract(record) if self.extract is not None else record[self.column]

    def label_of(self, values: Mapping[str, Any]) -> str | None:
        """The label of a step given its axis values (or a step record holding this axis' value)."""
        if self.rules is None:
            return values[self.column]
        return self.rules.label(
            {**values, self.column: values[self.column] if self.column in values else self.value(values)}
        )

    def label_values(self) -> tuple[str, ...] | None:
        """The closed set of labels the label column holds, or None without a label column."""
        return None if self.rules is None else self.rules.label_values({OUTCOME_COLUMN: OUTCOMES})

    def label_sql(self) -> str:
        """SQL: the label, over a relation with the axis values (:meth:`Axes.relation`)."""
        return self.rules.sql() if self.rules is not None else self.column


class Axes(tuple):
    """The axes in force, in order (a tuple of :class:`Axis`), with what is generated from them."""

    def __new__(cls, axes: Iterable[Axis] = ()) -> Axes:
        out = super().__new__(cls, tuple(axes))
        for kind, names in (
            ("name", [a.name for a in out]),
            ("column", [c for a in out for c in (a.column, a.label) if c]),
        ):
            if len(set(names)) != len(names):
                raise ValueError(f"axis {kind}s must be unique: {sorted({n for n in names if names.count(n) > 1})}")
        return out

    def __getitem__(self, key: Any) -> Any:  # by position, slice or name
        if isinstance(key, str):
            for axis in self:
                if axis.name == key:
                    return axis
            raise KeyError(f"no axis {key!r}; axes: {[a.name for a in self]}")
        return super().__getitem__(key)

    @property
    def columns(self) -> tuple[str, ...]:
        """The value columns, in axis order."""
        return tuple(a.column for a in self)

    @property
    def stored_columns(self) -> tuple[str, ...]:
        """The value columns the step table stores."""
        return tuple(a.column for a in self if a.stored)

    @property
    def label_columns(self) -> tuple[str, ...]:
        """The label columns (what a split's samples carry), in axis order."""
        return tuple(a.label for a in self if a.label)

    def key_columns(self) -> tuple[str, ...]:
        """The columns a step's stratum is read from: per axis, its label or its value."""
        return tuple(a.key for a in self)

    def values_of(self, record: Mapping[str, Any]) -> dict[str, Any]:
        """Every axis value of a step record, keyed by column."""
        return {a.column: a.value(record) for a in self}

    def labels_of(self, record: Mapping[str, Any]) -> dict[str, str | None]:
        """Every label column's value for a step record."""
        values = {**record, **self.values_of(record)}
        return {a.label: a.label_of(values) for a in self if a.label}

    def relation(self, source: str) -> str:
        """``source`` (a table expression) with the computed axis values added as columns, if any."""
        derived = [f"{a.value_sql} AS {a.column}" for a in self if not a.stored]
        return f"(SELECT *, {', '.join(derived)} FROM {source})" if derived else source

    def strata_sql(self) -> str:
        """The strata table's axis columns, in axis order: each value, then its label."""
        return ", ".join(f"{a.column}" + (f", {a.label_sql()} AS {a.label}" if a.label else "") for a in self)


#: the three axes of EnvSimBench strata
OUTCOME = Axis("outcome", "outcome", "VARCHAR", values=OUTCOMES)
DELTA = Axis(
    "delta",
    "delta_size",
    "INTEGER",
    label="delta_bucket",
    rules=bucket_rules("delta_size", DELTA_BUCKETS),
    label_doc="|Δ| bucket, labelled by its range",
    min_value=0,
    by_value=True,
    by_label=True,
)
ARGS = Axis(
    "args",
    "args_count",
    "INTEGER",
    label="args_cardinality",
    rules=grouped_rules("args_count", ARGS_GROUPED_FROM),
    label_doc="argument-count bucket",
    min_value=0,
    by_value=True,
)

#: the axes in force
AXES = Axes((OUTCOME, DELTA, ARGS))


def with_axis(axis: Axis, axes: Axes = AXES) -> Axes:
    """The axes in force and ``axis`` after them: adding an axis is this one entry."""
    return Axes((*axes, axis))
