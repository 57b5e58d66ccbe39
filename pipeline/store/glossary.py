"""The one glossary of the data's closed value sets: for every column that holds one of a fixed set of texts, the
set, derived from the rules that produce the values (the environment registry declares each source and adapter
here as it registers it). Every description of such a column is written from this set (:func:`describe`), so a
documented value set is the one the data holds (``tests/store/test_glossary.py``).
"""

from __future__ import annotations

from collections import UserDict
from collections.abc import Callable

from pipeline.core.axes import AXES
from pipeline.core.outcome import OUTCOMES
from pipeline.core.strata import RULES
from pipeline.store.kinds import SPLIT_KINDS  # not store.versions: the sandbox worker reaches this module, no pyarrow

#: the ``source`` of samples imported from the EnvSimBench release (no registered source: never executed here)
IMPORTED_SOURCE = "envsimbench"

# values declared by the layers above storage as they register them (the environment registry: sources, adapters)
_DECLARED: dict[str, dict[str, None]] = {"source": {}, "adapter": {}}


def declare(column: str, value: str) -> None:
    """Add ``value`` to the closed set of ``column`` (the environment registry, as it registers a source)."""
    _DECLARED[column][value] = None


def retract(column: str, value: str) -> None:
    """Remove ``value`` from ``column``'s declared set (a test's temporary source going away)."""
    _DECLARED[column].pop(value, None)


#: the closed-set columns the strata rules read, with their values
_DOMAINS = {"outcome": OUTCOMES}

#: column -> its closed set (computed when asked: the registry's sets grow as sources register)
_SETS: dict[str, Callable[[], tuple[str, ...]]] = {
    "outcome": lambda: OUTCOMES,
    **{a.label: lambda axis=a: axis.label_values() or () for a in AXES if a.label},
    "benchmark_cell": lambda: RULES.benchmark_cell.label_values(_DOMAINS),
    "balance2_group": lambda: RULES.balance2_group.label_values(_DOMAINS),
    "benchmark_group": lambda: RULES.benchmark_group.label_values(_DOMAINS),
    "source": lambda: tuple(_DECLARED["source"]),
    "adapter": lambda: tuple(_DECLARED["adapter"]),
    "kind": lambda: SPLIT_KINDS.names(),
}

#: columns whose rows may hold a value outside the set, and what it means (appended to the description)
_ALSO: dict[str, str] = {
    "outcome": " (`failure`: the environment refused the call, by the corpus's outcome rule; `error`: it raised, "
    "timed out or crashed)",
    "adapter": "; null for samples imported from the EnvSimBench release",
    "source": f"; `{IMPORTED_SOURCE}` for samples imported from the EnvSimBench release",
    "benchmark_cell": "; NULL when none (errors, |Δ| beyond the buckets, no_change with 2+ arguments)",
    "balance2_group": "; NULL for error steps and |Δ| beyond the buckets",
}


def closed_columns() -> tuple[str, ...]:
    """The columns with a closed value set."""
    return tuple(_SETS)


def values(column: str) -> tuple[str, ...]:
    """The closed set of texts ``column`` holds, in rule order (KeyError: not a closed-set column)."""
    return _SETS[column]()


def documented_values(column: str) -> tuple[str, ...]:
    """Every non-null value a row may hold in ``column``: its closed set, and the imported source for ``source``."""
    return values(column) + ((IMPORTED_SOURCE,) if column == "source" else ())


def enumerate_values(items: tuple[str, ...]) -> str:
    """``a``, ``b`` or ``c`` (each in backticks)."""
    quoted = [f"`{v}`" for v in items]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1] if quoted else "(none)"


def describe(column: str, meaning: str) -> str:
    """``meaning`` of ``column`` followed by its closed set, when it has one: ``meaning: `a`, `b` or `c```. An
    empty declared set (the environment registry never loaded) leaves the meaning alone."""
    if column not in _SETS or (column in _DECLARED and not _DECLARED[column]):
        return meaning
    return f"{meaning}: {enumerate_values(values(column))}{_ALSO.get(column, '')}"


class Described(UserDict[str, str]):
    """Column -> description, each closed-set column's meaning completed by its value set when read
    (:func:`describe`); :attr:`meanings` holds the entries as set."""

    def __getitem__(self, column: str) -> str:
        return describe(column, self.data[column])

    @property
    def meanings(self) -> dict[str, str]:
        return self.data
