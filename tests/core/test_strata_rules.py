"""The strata rules are one table: the Python functions and the SQL CASE expressions are generated
from it and agree on every |Δ| / outcome / argument-count combination."""

import itertools
import re
from pathlib import Path

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.core import strata
from pipeline.core.strata import (
    BALANCE2_GROUP_SQL,
    BENCHMARK_CELL_SQL,
    BENCHMARK_GROUP_SQL,
    Cell,
    Composition,
    StrataRules,
    args_cardinality,
    balance2_group,
    benchmark_cell,
    benchmark_group,
    delta_bucket,
)

OUTCOMES = ("success", "failure", "error", "sandbox_refused")
DELTAS = list(range(0, 21)) + [50, 999, 2**31 - 1]
ARGS = range(0, 6)


_DUCK = duckdb.connect()


def _sql_rows(expressions: dict[str, str], rows: list[tuple[str, int, int]]) -> list[tuple]:
    """The rows through the SQL expressions, in one query (columns as typed lists, unnested side by side)."""
    outcomes, deltas, args = (list(column) for column in zip(*rows, strict=True))
    cols = ", ".join(f"{sql} AS {name}" for name, sql in expressions.items())
    return _DUCK.execute(
        f"SELECT outcome, delta_size, args_count, {cols} FROM (SELECT unnest($1::VARCHAR[]) AS outcome, "
        "unnest($2::INTEGER[]) AS delta_size, unnest($3::INTEGER[]) AS args_count) ORDER BY ALL",
        [outcomes, deltas, args],
    ).fetchall()


def _python_rows(functions: dict[str, object], rows: list[tuple[str, int, int]]) -> list[tuple]:
    return sorted((o, d, a, *(f(o, d, a) for f in functions.values())) for o, d, a in rows)


MODULE_SQL = {
    "delta_bucket": strata.RULES.delta_bucket.sql(),
    "args_cardinality": strata.RULES.args_cardinality.sql(),
    "benchmark_cell": BENCHMARK_CELL_SQL,
    "balance2_group": BALANCE2_GROUP_SQL,
    "benchmark_group": BENCHMARK_GROUP_SQL,
}
MODULE_PY = {
    "delta_bucket": lambda o, d, a: delta_bucket(d),
    "args_cardinality": lambda o, d, a: args_cardinality(a),
    "benchmark_cell": benchmark_cell,
    "balance2_group": lambda o, d, a: balance2_group(o, d),
    "benchmark_group": lambda o, d, a: benchmark_group(o, d),
}


def test_python_and_sql_agree_on_every_combination():
    rows = list(itertools.product(OUTCOMES, DELTAS, ARGS))
    assert _sql_rows(MODULE_SQL, rows) == _python_rows(MODULE_PY, rows)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(OUTCOMES), st.one_of(st.integers(0, 20), st.integers(0, 2**31 - 1)), st.integers(0, 5)
        ),
        min_size=1,
        max_size=30,
    )
)
def test_python_and_sql_agree_property(rows):
    assert _sql_rows(MODULE_SQL, rows) == _python_rows(MODULE_PY, rows)


def test_labels_are_the_documented_ones():
    """The values the strata table has always held (docs/definitions.md §5)."""
    assert [delta_bucket(d) for d in (0, 1, 2, 3, 6, 7, 12, 13, 10**6)] == [
        "0",
        "1-2",
        "1-2",
        "3-6",
        "3-6",
        "7-12",
        "7-12",
        "13+",
        "13+",
    ]
    assert [args_cardinality(a) for a in range(6)] == ["0", "1", "2", "3+", "3+", "3+"]
    assert [benchmark_cell("success", d, 0) for d in (0, 1, 2, 3, 6, 7, 12, 13)] == [
        "no_change_args0",
        "simple_1",
        "simple_2",
        "medium_3",
        "medium_6",
        "difficult",
        "difficult",
        None,
    ]
    assert benchmark_cell("success", 0, 1) == "no_change_args1" and benchmark_cell("success", 0, 2) is None
    assert benchmark_cell("failure", 0, 3) == "failure" and benchmark_cell("failure", 1, 0) is None
    assert benchmark_cell("error", 0, 0) is None
    assert [balance2_group("success", d) for d in (0, 2, 3, 12, 13)] == [
        "no_change",
        "simple",
        "complex",
        "complex",
        None,
    ]
    assert balance2_group("failure", 12) == "failure" and balance2_group("failure", 13) is None
    assert balance2_group("error", 0) is None
    assert [benchmark_group("success", d) for d in (0, 2, 6, 7, 40)] == [
        "no_change",
        "simple",
        "medium",
        "difficult",
        "difficult",
    ]
    assert benchmark_group("failure", 5) == "failure"
    cells = strata.BENCHMARK_CELLS
    assert [(c.name, c.group, c.quota, c.outcome, c.delta_min, c.delta_max, c.args_count) for c in cells] == [
        ("failure", "failure", 20, "failure", 0, 0, None),
        ("no_change_args0", "no_change", 40, "success", 0, 0, 0),
        ("no_change_args1", "no_change", 40, "success", 0, 0, 1),
        ("simple_1", "simple", 25, "success", 1, 1, None),
        ("simple_2", "simple", 25, "success", 2, 2, None),
        ("medium_3", "medium", 50, "success", 3, 3, None),
        ("medium_4", "medium", 50, "success", 4, 4, None),
        ("medium_5", "medium", 50, "success", 5, 5, None),
        ("medium_6", "medium", 50, "success", 6, 6, None),
        ("difficult", "difficult", 50, "success", 7, 12, None),
    ]
    assert Composition().benchmark_size == 400


def test_a_changed_threshold_changes_python_and_sql_together():
    """The table is the only definition: move the simple/medium threshold from 2 to 3 and both the
    functions and the SQL move, and so does the default composition."""
    wider = StrataRules((("none", 0), ("simple", 3), ("medium", 6), ("difficult", 12), ("beyond", None)))
    rows = list(itertools.product(OUTCOMES, DELTAS, ARGS))
    rules = {
        "delta_bucket": wider.delta_bucket,
        "benchmark_cell": wider.benchmark_cell,
        "balance2_group": wider.balance2_group,
        "benchmark_group": wider.benchmark_group,
    }
    sql = {name: r.sql() for name, r in rules.items()}
    py = {name: (lambda r: lambda o, d, a: r.label(o, d, a))(r) for name, r in rules.items()}
    assert _sql_rows(sql, rows) == _python_rows(py, rows)
    assert wider.delta_bucket.label(delta_size=3) == "1-3" != delta_bucket(3)
    con = duckdb.connect()
    assert con.execute(f"SELECT {sql['delta_bucket']} FROM (SELECT 3 AS delta_size)").fetchone()[0] == "1-3"
    assert con.execute(f"SELECT {strata.RULES.delta_bucket.sql()} FROM (SELECT 3 AS delta_size)").fetchone()[0] == "3-6"
    assert wider.benchmark_cell.label("success", 3, 0) == "simple_3"
    assert [c.name for c in wider.benchmark_cells if c.group == "simple"] == ["simple_1", "simple_2", "simple_3"]
    assert wider.balance2_group.label("success", 3) == "simple"
    later = StrataRules((("none", 0), ("simple", 2), ("medium", 6), ("difficult", 15), ("beyond", None)))
    assert later.benchmark_cell.label("success", 14, 0) == "difficult" and benchmark_cell("success", 14, 0) is None
    assert "15" in later.benchmark_cell.sql() and "15" not in BENCHMARK_CELL_SQL
    with pytest.raises(ValueError, match="buckets must be"):
        StrataRules((("none", 0), ("simple", 2)))


def test_cells_of_a_custom_composition_agree_with_their_sql():
    comp = Composition(
        (
            Cell("fail_any", "failure", 5, "failure", 0, 12),
            Cell("two", "simple", 5, "success", 1, 2),
            Cell("one_or_two", "simple", 5, "success", 1, 2, 1),
            Cell("odd'name", "x", 1, "success", 0, 0),
        )
    )
    rows = list(itertools.product(OUTCOMES, DELTAS, ARGS))
    con = duckdb.connect()
    con.execute("CREATE TABLE s(outcome VARCHAR, delta_size INTEGER, args_count INTEGER)")
    con.executemany("INSERT INTO s VALUES (?, ?, ?)", rows)
    got = con.execute(f"SELECT outcome, delta_size, args_count, {comp.cells_sql()} FROM s ORDER BY ALL").fetchall()
    assert [(o, d, a, [c for c in cells if c is not None]) for o, d, a, cells in got] == sorted(
        (o, d, a, comp.cells_of(o, d, a)) for o, d, a in rows
    )
    assert comp.cells_of("success", 1, 1) == ["two", "one_or_two"]  # overlapping cells: a candidate for both
    with pytest.raises(ValueError, match="unique"):
        Composition((Cell("a", "g", 1), Cell("a", "g", 2)))
    with pytest.raises(ValueError, match="unknown Balance2 group"):
        Composition(mixture_sizes={"medium": 3})


#: a threshold written as a literal comparison on |Δ| (or a range) outside the rule table
_THRESHOLD = re.compile(
    r"delta_size\s*(<=|>=|<|>|=)\s*\d|delta_size BETWEEN \d|delta_size\s*(<=|<|>)\s*\d|"
    r"delta\w*\s*(<=|<|>|>=)\s*(2|6|12)\b"
)


def test_no_threshold_is_written_outside_the_table():
    root = Path(__file__).resolve().parents[2]
    offenders = []
    for path in sorted([*root.glob("pipeline/**/*.py"), *root.glob("assets/*.py")]):
        if path.name == "strata.py":
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if _THRESHOLD.search(line):
                offenders.append(f"{path.relative_to(root)}:{n}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


def test_one_vocabulary_a_bucket_label_is_never_a_cell_or_group_name():
    """|Δ| bucket labels are ranges; cell, benchmark-group and Balance2-group names are words, each spelled
    one way (``no_change``, never ``no_change``)."""
    rows = list(itertools.product(OUTCOMES, DELTAS, ARGS))
    buckets = {delta_bucket(d) for d in DELTAS} | {delta_bucket(10**6)}
    names = (
        {c.name for c in strata.BENCHMARK_CELLS}
        | {c.group for c in strata.BENCHMARK_CELLS}
        | set(strata.BALANCE2_GROUPS)
        | {benchmark_group(o, d) for o, d, _ in rows if o != "error"}
    )
    assert buckets == {"0", "1-2", "3-6", "7-12", "13+"}
    assert not buckets & names, buckets & names
    assert not any("-" in n for n in names), "one spelling: no_change, not no_change"
