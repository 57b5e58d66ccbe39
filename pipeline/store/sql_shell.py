"""``./forge sql [QUERY]``: SQL on a data root's ``envsim.duckdb`` (read-only) from any directory (docs/sql.md): a
query's last result printed as a table, else an interactive prompt (the ``duckdb`` CLI of the library's version
when on the ``PATH``, else a small prompt of its own).
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
from contextlib import suppress
from pathlib import Path
from typing import TextIO

import duckdb

from pipeline.core.root_lock import held_by
from pipeline.store.duck import DUCKDB_FILE, open_data_root, repair_index
from pipeline.store.layout import DataLayout, default_data_root, resolve_root

PROMPT, MORE = "D ", "· "
HELP = (
    "statements end with ';' (several lines are fine); .tables: the tables and views; .quit or Ctrl-D: leave; "
    "every table, view and column is commented: SELECT * FROM duckdb_columns();"
)
#: rows a result prints at most
MAX_ROWS = 1000
TABLES = (
    "SELECT DISTINCT name, kind FROM (SELECT table_name AS name, 'table' AS kind FROM duckdb_tables() "
    "WHERE NOT internal UNION ALL SELECT view_name, 'view' FROM duckdb_views() WHERE NOT internal "
    "AND schema_name IN ('main', 'temp')) ORDER BY name"
)


def run_query(con: duckdb.DuckDBPyConnection, sql: str) -> int:
    """Run ``sql`` and print the last statement's result as a table (up to ``MAX_ROWS``); 1 with the error on stderr."""
    try:
        result = con.sql(sql)
        if result is None:  # a statement with no result (SET, CREATE TEMP TABLE, ...)
            return 0
        rows = result.limit(MAX_ROWS + 1).to_arrow_table()
        width = shutil.get_terminal_size().columns if sys.stdout.isatty() else 100_000
        con.from_arrow(rows.slice(0, MAX_ROWS)).show(max_rows=MAX_ROWS + 1, max_width=width)
        if rows.num_rows > MAX_ROWS:
            print(f"(the first {MAX_ROWS} rows; add a LIMIT / OFFSET for others)")
    except duckdb.Error as exc:
        print(f"Error: {exc}", file=sys.stderr, flush=True)
        return 1
    sys.stdout.flush()
    return 0


def repl(con: duckdb.DuckDBPyConnection, database: Path, stdin: TextIO = sys.stdin) -> int:
    """The prompt of its own: statements until ``;``, dot commands, errors printed without leaving. Standard input
    that is not a terminal is read the same way, without prompts; then the status is 1 if a statement failed."""
    interactive = stdin.isatty()
    if interactive:
        with suppress(ImportError):  # not on every platform
            import readline  # noqa: F401 - line editing and history for input()
        print(f"{database} (read-only) — {HELP}")
    buffer: list[str] = []
    failed = 0
    while True:
        try:
            line = input(MORE if buffer else PROMPT) + "\n" if interactive else stdin.readline()
        except KeyboardInterrupt:  # Ctrl-C drops the statement being typed
            buffer = []
            print()
            continue
        except EOFError:
            break
        if not line:  # the end of piped input
            break
        stripped = line.strip()
        if not buffer and stripped.startswith("."):
            command = stripped.split()[0]
            if command in (".quit", ".exit", ".q"):
                break
            if command == ".tables":
                run_query(con, TABLES)
            else:
                print(HELP)
            continue
        buffer.append(line)
        if stripped.endswith(";"):
            failed |= run_query(con, "".join(buffer))
            buffer = []
    if "".join(buffer).strip():
        failed |= run_query(con, "".join(buffer))
    return 0 if interactive else failed


def _duckdb_cli() -> str | None:
    """A ``duckdb`` CLI on the PATH of the library's version (major.minor), else None."""
    cli = shutil.which("duckdb")
    if not cli:
        return None
    try:
        version = subprocess.run([cli, "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    wanted = ".".join(duckdb.__version__.split(".")[:2])
    return cli if version.lstrip("v").startswith(wanted + ".") else None


def command(data_root: Path) -> str:
    """The command that opens ``data_root``'s SQL, as the summary prints it (``--data-root`` unless default)."""
    root = resolve_root(data_root)
    default = root == resolve_root(default_data_root())
    return "./forge sql" if default else f"./forge sql --data-root {shlex.quote(str(root))}"


def _cannot_open(database: Path, exc: duckdb.Error) -> str:
    """Why ``database`` cannot be opened, in one line: a run writing it, else DuckDB's own first line."""
    if "lock" not in str(exc).lower():
        return f"cannot open {database}: {str(exc).splitlines()[0]}"
    holder = held_by(database.parent)
    who = f"./forge run (pid {holder.pid}, started {holder.started})" if holder and holder.pid else "another process"
    return f"{database} is being written by {who}: wait until it ends, then query again"


def main(argv: list[str], data_root: Path) -> int:
    prog = "./forge sql"
    parser = argparse.ArgumentParser(
        prog=prog,
        description=(
            "Run SQL on the data root's envsim.duckdb (read-only) from any directory: QUERY's result is printed as "
            "a table (statements on standard input too); without QUERY, an interactive prompt (the duckdb CLI when "
            "one of the library's version is on the PATH). docs/sql.md has the views, tables and a cookbook."
        ),
    )
    parser.add_argument("query", nargs="?", help="SQL to run (one or more statements; the last one's result prints)")
    parser.add_argument("-c", "--command", help="SQL to run, as the duckdb and psql shells take it (or QUERY)")
    parser.add_argument("--data-root", type=Path, help="the data root (default: ENVSIM_DATA_ROOT, else ./data)")
    args = parser.parse_args(argv)
    if args.command is not None and args.query is not None:
        parser.error("give the SQL once: as QUERY or as -c, not both")
    args.query = args.command if args.command is not None else args.query
    root = resolve_root(args.data_root or data_root)
    database = root / DUCKDB_FILE
    if rebuilt := repair_index(DataLayout.at(root)):  # an index of the Parquet tables: empty or invalid, made again
        print(f"{prog}: {rebuilt}", file=sys.stderr, flush=True)
    if not database.is_file():
        print(
            f"{prog}: no {DUCKDB_FILE} in {root}: ./forge run makes it (or name the root: --data-root DIR)",
            file=sys.stderr,
        )
        return 2
    if args.query is None and sys.stdin.isatty():
        cli = _duckdb_cli()
        if cli:  # the real shell: the views find their files next to the database file (docs/sql.md)
            sys.stdout.flush()
            os.execv(cli, [cli, "-readonly", str(database)])
    try:
        con = open_data_root(root)
    except duckdb.Error as exc:  # e.g. a run holds it open for writing
        print(f"{prog}: {_cannot_open(database, exc)}", file=sys.stderr)
        return 1
    with con:
        return repl(con, database) if args.query is None else run_query(con, args.query)
