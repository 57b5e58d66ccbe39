"""``envsim.duckdb`` is an index of the Parquet tables of record (issue 52, item 3): empty (a write a full disk cut
short), not a DuckDB database, or missing under a root that holds tables, it is made again from the tables, with
one line saying so, by ``./forge run`` / ``./forge sql`` and the ``duckdb`` resource; a good one is left alone."""

from __future__ import annotations

import pytest

from pipeline.collect.sources import env_items
from pipeline.envs.catalog import build_catalog
from pipeline.envs.registry import sources_config
from pipeline.store import sql_shell
from pipeline.store.duck import open_data_root, repair_index
from pipeline.store.layout import DataLayout


@pytest.fixture
def layout(tmp_path) -> DataLayout:
    """A data root holding one table of record (the builtin pack's catalog), no DuckDB file yet."""
    layout = DataLayout.at(tmp_path / "data")
    items, issues = env_items(sources_config(bfcl={"categories": [], "replay": False}))
    build_catalog(layout, items, issues, disabled=("bfcl",))
    return layout


def _environments(layout: DataLayout) -> int:
    with open_data_root(layout.root) as con:
        return con.execute("SELECT count(*) FROM environments").fetchone()[0]


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (b"", "is empty (0 bytes)"),
        (b"not a database at all, just text", "is not a DuckDB database file"),
        (None, "was missing"),
    ],
    ids=["empty", "invalid", "missing"],
)
def test_a_broken_index_is_rebuilt_from_the_parquet_tables_in_one_line(layout, content, said):
    if content is not None:
        layout.duckdb.write_bytes(content)
    line = repair_index(layout)
    assert line is not None and line.startswith(f"{layout.duckdb} {said}: rebuilt from the Parquet tables under")
    assert "\n" not in line
    assert _environments(layout) == 10
    assert repair_index(layout) is None  # a good index is left alone


def test_a_fresh_root_gets_no_index_and_no_line(tmp_path):
    assert repair_index(DataLayout.at(tmp_path / "fresh")) is None
    assert not (tmp_path / "fresh").exists()


def test_forge_sql_rebuilds_an_empty_index_and_answers(layout, capsys):
    layout.duckdb.write_bytes(b"")
    assert sql_shell.main(["SELECT count(*) AS n FROM environments"], layout.root) == 0
    captured = capsys.readouterr()
    (line,) = captured.err.splitlines()
    assert line.startswith(f"./forge sql: {layout.duckdb} is empty (0 bytes): rebuilt from the Parquet tables")
    assert "10" in captured.out
