"""The DuckDB database under the data root: a view over each table of record, and the tables of every split version
and its members. Views name their Parquet files relative to the DuckDB file (``HERE_SQL``), so a plain DuckDB client
answers every view from any directory, also after the root moved (docs/sql.md). :func:`sync` is the one sync of
every connection the pipeline opens on ``envsim.duckdb``.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb

from pipeline.core.axes import AXES, Axes, quote
from pipeline.core.strata import BENCHMARK_GROUP_SQL
from pipeline.store import catalog, tables
from pipeline.store.layout import DataLayout
from pipeline.store.versions import SPLIT_KINDS, SplitStore

#: SQL: the directory of the DuckDB file this connection opened, as a prefix ('' for a file opened by its bare name,
#: e.g. ``data/`` or ``/srv/envsim/data/``), or '' when ``file_search_path`` is set (then it resolves relative
#: paths). DuckDB has no file-relative paths and a view's table function cannot contain a subquery, so this reads
#: the file's place from ``temp_directory``, whose default is ``<database file>.tmp`` — a constant expression.
HERE_SQL = (
    "(CASE WHEN current_setting('file_search_path') = '' "
    "THEN regexp_extract(current_setting('temp_directory'), '^(.*[/\\\\])', 1) ELSE '' END)"
)


def _in_root(layout: DataLayout, path: Path | str, relative: bool = True) -> str:
    """SQL for ``path`` as a view names it: relative to the DuckDB file's directory (``HERE_SQL``; POSIX
    separators) when it lies under the data root and ``relative``, else absolute."""
    path, root = Path(path).resolve(), layout.root.resolve()
    if relative and path.is_relative_to(root):
        return f"{HERE_SQL} || {quote(path.relative_to(root).as_posix())}"
    return quote(str(path))


def parquet_views(layout: DataLayout, relative: bool = True) -> dict[str, str]:
    """The view of every table of record with files under ``layout``'s root now (name -> SELECT over globs, so
    later files are in it too), paths relative to the DuckDB file's directory unless not ``relative``."""
    root = layout.root.resolve()
    views: dict[str, str] = {}
    for name, table in tables.stored(tables.PARQUET).items():
        present = [_in_root(layout, root / glob, relative) for glob in table.files if any(root.glob(glob))]
        if present:
            files = present[0] if len(table.files) == 1 else f"[{', '.join(present)}]"
            views[name] = table.view.replace("{files}", files)
    return views


def _exists(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    return bool(
        con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = ? AND NOT temporary", [name]).fetchone()[0]
        or con.execute("SELECT count(*) FROM duckdb_views() WHERE view_name = ? AND NOT internal", [name]).fetchone()[0]
    )


def _stored_views(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """The SQL of every view stored in the database (name -> ``CREATE VIEW …;`` as DuckDB renders it)."""
    return dict(
        con.execute("SELECT view_name, sql FROM duckdb_views() WHERE NOT internal AND NOT temporary").fetchall()
    )


def _create_view(con: duckdb.DuckDBPyConnection, name: str, select: str, stored: dict[str, str] | None) -> None:
    """``CREATE OR REPLACE VIEW name AS select`` (``stored`` None: a temporary one), unless ``stored`` holds it with
    the same SQL and columns already: a replaced view loses its comments, and commenting it again costs."""
    if stored is not None and name in stored:
        rendered = con.execute("SELECT json_deserialize_sql(json_serialize_sql(?))", [select]).fetchone()[0]
        if stored[name] == f"CREATE VIEW {name} AS {rendered};":
            kept = con.execute(
                "SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = ? AND database_name <> 'temp' "
                "ORDER BY column_index",
                [name],
            ).fetchall()
            if kept == [(r[0], r[1]) for r in con.execute(f"DESCRIBE {select}").fetchall()]:
                return
    con.execute(f"CREATE OR REPLACE {'' if stored is not None else 'TEMP '}VIEW {name} AS {select}")


def _repoint(con: duckdb.DuckDBPyConnection, layout: DataLayout) -> list[str]:
    """Resolve the views' relative paths against ``layout``'s root (``file_search_path``), then (re-)create every
    Parquet view (read-only: as temporary views), the derived views and the comments. Returns the views' names."""
    root = layout.root.resolve()
    con.execute(f"SET file_search_path = {quote(str(root))}")
    temp = "TEMP " if catalog.read_only(con) else ""
    # relative paths where the file moves with the data root (envsim.duckdb in it); absolute for a file kept elsewhere
    database = con.execute("SELECT path FROM duckdb_databases() WHERE database_name = current_database()").fetchone()[0]
    views = parquet_views(layout, relative=not database or Path(database).resolve().parent == root)
    stored = None if temp else _stored_views(con)
    for name, select in views.items():
        _create_view(con, name, select, stored)
    if not views.get("benchmark_samples") and not temp and not _exists(con, "benchmark_samples"):
        con.execute("CREATE OR REPLACE VIEW benchmark_samples AS SELECT NULL::VARCHAR AS version WHERE false")
    if not temp:
        derived_views(con)
    catalog.describe(con)
    return list(views)


def derived_views(con: duckdb.DuckDBPyConnection, axes: Axes = AXES) -> None:
    """The views over other tables (no file paths), where their tables exist."""
    stored = _stored_views(con)
    if _exists(con, "split_members"):
        values = ", ".join(f"m.{column}" for column in axes.stored_columns)  # every axis value a sample stores
        changes = [
            f"""SELECT p.kind, p.version_a, p.version_b, '{change}' AS change,
                      m.step_id, m.stratum, m.env_id, m.task_id, m.tool,
                      {values}
               FROM pairs p JOIN split_members m ON m.kind = p.kind AND m.version = p.{there}
               WHERE NOT EXISTS (SELECT 1 FROM split_members o
                                 WHERE o.kind = p.kind AND o.version = p.{not_there} AND o.step_id = m.step_id)"""
            for change, there, not_there in (("added", "version_b", "version_a"), ("removed", "version_a", "version_b"))
        ]
        _create_view(
            con,
            "split_diff",
            f"""WITH pairs AS (SELECT a.kind, a.version AS version_a, b.version AS version_b
                              FROM split_versions a JOIN split_versions b ON a.kind = b.kind AND a.version <> b.version)
               {" UNION ALL ".join(changes)}""",
            stored,
        )
    if _exists(con, "served_episodes"):
        _create_view(
            con,
            "served_reward",
            """SELECT task_id, env_id, mode, count(*) AS episodes, count(reward) AS rewarded,
                      avg(reward) AS mean_reward, min(reward) AS min_reward, max(reward) AS max_reward
               FROM served_episodes GROUP BY ALL""",
            stored,
        )
    if _exists(con, "served_steps"):
        _create_view(
            con,
            "served_drift_by_step",
            """SELECT simulator, step_index, count(*) AS steps, avg(drift) AS mean_drift, max(drift) AS max_drift,
                      avg(fm::INT) AS fm_rate, avg(cm::INT) AS cm_rate
               FROM served_steps WHERE mode = 'shadow' GROUP BY ALL""",
            stored,
        )
    if _exists(con, "eval_results"):
        labels = "".join(f", {a.label_sql()} AS {a.label}" for a in axes if a.by_label)
        _create_view(
            con,
            "eval_results_strata",
            f"""SELECT *, {BENCHMARK_GROUP_SQL} AS benchmark_group{labels} FROM {axes.relation("eval_results")}""",
            stored,
        )


def ensure_table(con: duckdb.DuckDBPyConnection, name: str) -> None:
    """Create the ``duckdb`` table ``name`` from its declaration (:mod:`pipeline.store.tables`), or bring an older
    one up to date (a column it lacks is added, NULL for its rows)."""
    table = tables.table(name)
    if table.storage != tables.DUCKDB:
        raise ValueError(f"{name} is a {table.storage} table, not one kept inside envsim.duckdb")
    columns = table.sql_columns
    primary = f", PRIMARY KEY ({', '.join(table.key)})" if table.key else ""
    con.execute(f"CREATE TABLE IF NOT EXISTS {name} ({', '.join(f'{c} {t}' for c, t in columns.items())}{primary})")
    have = {
        row[0]
        for row in con.execute(
            "SELECT column_name FROM duckdb_columns() WHERE table_name = ? AND database_name = current_database() "
            "AND schema_name = current_schema()",
            [name],
        ).fetchall()
    }
    for column, kind_sql in columns.items():
        if column not in have:
            con.execute(f"ALTER TABLE {name} ADD COLUMN {column} {kind_sql}")


def register_splits(con: duckdb.DuckDBPyConnection, layout: DataLayout) -> dict[str, int]:
    """The one registration of split versions: every version of every split kind on disk into ``split_versions``
    (refreshed on every call) and ``split_members`` (once per version), and the tables declared ``from_manifests``.
    Returns the version count per kind."""
    kinds = SPLIT_KINDS.names()
    ensure_table(con, "split_versions")
    ensure_table(con, "split_members")
    versions_columns = tables.table("split_versions").sql_columns
    counts = {}
    for kind in kinds:
        store = SplitStore(layout, kind)
        current = store.current()
        provenance = store.provenance()
        members = {
            r[0] for r in con.execute("SELECT DISTINCT version FROM split_members WHERE kind = ?", [kind]).fetchall()
        }
        for version in store.versions():
            manifest = store.manifest(version)
            spec = manifest["spec"]
            prov = provenance.get(version, {})
            row = [kind, version, spec.get("seed"), spec.get("input"), json.dumps(spec, sort_keys=True)]
            row += [manifest["samples"], len(manifest["shortfalls"]), False]  # is_current: set below
            row += [prov.get(c) for c in ("created_at", "dagster_run_id", "parent_version")]
            con.execute(
                f"INSERT OR REPLACE INTO split_versions ({', '.join(versions_columns)}) "
                f"VALUES ({', '.join('?' for _ in row)})",
                row,
            )
            if version not in members:
                con.execute(
                    f"""INSERT INTO split_members SELECT ?, ?, {", ".join(tables.MEMBER_COLUMNS)}
                        FROM read_parquet({quote(str(store.samples(version).resolve()))})""",
                    [kind, version],
                )
        con.execute(
            "UPDATE split_versions SET is_current = (version IS NOT DISTINCT FROM ?) WHERE kind = ?", [current, kind]
        )
        counts[kind] = con.execute("SELECT count(*) FROM split_versions WHERE kind = ?", [kind]).fetchone()[0]
    for table in tables.stored(tables.DUCKDB).values():
        if table.from_manifests is not None and table.from_manifests.kind in kinds:
            _register_manifest_rows(con, layout, table)
    return counts


def _register_manifest_rows(con: duckdb.DuckDBPyConnection, layout: DataLayout, table: tables.TableOfRecord) -> None:
    """Ensure the table and insert the rows of every version of its split kind that it does not hold yet."""
    source = table.from_manifests
    store = SplitStore(layout, source.kind)
    ensure_table(con, table.name)
    columns = list(table.sql_columns)
    known = {r[0] for r in con.execute(f"SELECT DISTINCT {columns[0]} FROM {table.name}").fetchall()}
    insert = f"INSERT INTO {table.name} ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)})"
    for version in store.versions():
        if version not in known:
            for row in source.rows(version, store.manifest(version), table.sql_columns):
                con.execute(insert, [row[c] for c in columns])


def sync(con: duckdb.DuckDBPyConnection, layout: DataLayout) -> list[str]:
    """The one sync of a connection with the data root ``layout``: register every split version unless the
    connection is read-only, then point the views at the root as it is now. Returns the views' names."""
    if not catalog.read_only(con):
        register_splits(con, layout)
    return _repoint(con, layout)
