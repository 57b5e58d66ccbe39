"""A table of record is one declaration (issue 42, item 5): a declaration registered from outside the tree (as a
plugin's ``envsim_forge.tables`` entry point registers it) is in the layout, in the warehouse's views — queried
through DuckDB — and in the catalog's comments, with no other file changed."""

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.store import tables, warehouse
from pipeline.store.duck import open_data_root
from pipeline.store.layout import DataLayout
from pipeline.store.tables import TABLES, TableOfRecord

PROBE_RUNS = TableOfRecord(
    "probe_runs",
    ("plugin/probe_runs/*.parquet",),
    "One row per probe run of the example plugin.",
    pa.schema([pa.field("probe", pa.string(), nullable=False), pa.field("latency_ms", pa.float64())]),
    {"probe": "The probe the plugin ran.", "latency_ms": "How long it took, in milliseconds."},
    tables.READ_UNION,
)


@pytest.fixture
def declared():
    TABLES.register(PROBE_RUNS)
    yield PROBE_RUNS
    TABLES.unregister(PROBE_RUNS.name)


def test_a_table_registered_from_outside_is_in_the_layout_the_views_and_the_comments(tmp_path, declared):
    layout = DataLayout.at(tmp_path / "data")
    path = layout.table("probe_runs", "night")
    assert path == tmp_path / "data" / "plugin" / "probe_runs" / "night.parquet"
    path.parent.mkdir(parents=True)
    rows = [{"probe": "ping", "latency_ms": 1.5}, {"probe": "pong", "latency_ms": 2.5}]
    pq.write_table(pa.Table.from_pylist(rows, schema=declared.schema), path)

    assert "probe_runs" not in warehouse.parquet_views(DataLayout.at(tmp_path / "empty"))  # no file, no view
    with open_data_root(layout.root, read_only=False) as con:
        assert con.execute("SELECT probe, latency_ms FROM probe_runs ORDER BY probe").fetchall() == [
            ("ping", 1.5),
            ("pong", 2.5),
        ]
        view_comment = con.execute("SELECT comment FROM duckdb_views() WHERE view_name = 'probe_runs'").fetchone()[0]
        columns = dict(
            con.execute("SELECT column_name, comment FROM duckdb_columns() WHERE table_name = 'probe_runs'").fetchall()
        )
    assert view_comment == declared.description
    assert columns == dict(declared.columns)
    # a plain client on the file, from elsewhere, answers the stored view
    plain = duckdb.connect(str(layout.duckdb), read_only=True)
    try:
        assert plain.execute("SELECT count(*) FROM probe_runs").fetchone()[0] == 2
    finally:
        plain.close()


def test_an_unknown_table_is_one_line_naming_the_known_ones(tmp_path):
    with pytest.raises(KeyError, match="unknown table of record 'nope'; known: .*'steps'"):
        DataLayout.at(tmp_path).table("nope")


def test_every_table_of_record_has_its_words(tmp_path):
    """Each declaration says what it holds and where: a Parquet table names at least one file, and a column it
    describes is in its schema; a DuckDB table types its columns, and its key and described columns are among
    them; a derived view names no file."""
    storages = {tables.PARQUET: 0, tables.DUCKDB: 0, tables.DERIVED: 0}
    for name, table in tables.declared().items():
        assert table.description, name
        storages[table.storage] += 1
        if table.storage == tables.PARQUET:
            assert table.files and not table.sql_columns, name
            if table.schema is not None:
                assert set(table.columns) <= set(table.schema.names), name
        elif table.storage == tables.DUCKDB:
            assert not table.files and table.sql_columns, name
            assert set(table.key) | set(table.columns) <= set(table.sql_columns), name
        else:
            assert not table.files and not table.sql_columns, name
    assert all(storages.values()), storages


def test_a_duckdb_table_is_created_and_migrated_from_its_declaration():
    """``ensure_table`` creates a declared DuckDB table with its key, and gives an older one (fewer columns) the
    columns it lacks, NULL for its rows; a Parquet table is refused."""
    con = duckdb.connect()
    warehouse.ensure_table(con, "split_versions")
    declared = tables.table("split_versions").sql_columns
    assert [r[0] for r in con.execute("DESCRIBE split_versions").fetchall()] == list(declared)
    con.execute("INSERT INTO split_versions (kind, version) VALUES ('benchmark', 'bench-1')")
    with pytest.raises(duckdb.ConstraintException):  # the declared key
        con.execute("INSERT INTO split_versions (kind, version) VALUES ('benchmark', 'bench-1')")
    con.execute("CREATE TABLE eval_job_runs (run_id VARCHAR, simulator VARCHAR)")
    con.execute("INSERT INTO eval_job_runs VALUES ('r1', 'oracle')")
    warehouse.ensure_table(con, "eval_job_runs")
    assert [r[0] for r in con.execute("DESCRIBE eval_job_runs").fetchall()] == list(
        tables.table("eval_job_runs").sql_columns
    )
    assert con.execute("SELECT run_id, served_model FROM eval_job_runs").fetchall() == [("r1", None)]
    with pytest.raises(ValueError, match="steps is a parquet table"):
        warehouse.ensure_table(con, "steps")
