"""``./forge sql``: SQL on the data root's ``envsim.duckdb`` (docs/sql.md)."""

from __future__ import annotations

from cli.base import command, data_root


@command(
    "[QUERY | -c QUERY] [--data-root DIR]   run SQL on the data root's envsim.duckdb and print the table; no QUERY: "
    "a prompt"
)
def sql(argv: list[str]) -> int:
    """``./forge sql [QUERY]``: SQL on the data root's ``envsim.duckdb``, a query or a prompt (docs/sql.md)."""
    from pipeline.store import sql_shell

    return sql_shell.main(argv, data_root())
