"""The SQL schema explains itself (issue 26, item 6): views that answer after the data root moves, a comment on
every table, view and column, a ``version`` column wherever rows belong to a version, split versions with their
created time, Dagster run and parent, evaluation results with their |Δ| bucket and cell, ``split_diff``, and a
cookbook (docs/sql.md) whose every query runs."""

import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from pipeline.curriculum import mixture as curriculum
from pipeline.evaluate import results
from pipeline.evaluate.simulators import SimulatorSpec
from pipeline.quality.environment_report import environment_report
from pipeline.quality.environment_yield import YieldSettings, environment_yield
from pipeline.rollouts import store as rollout_store
from pipeline.select.samples import materialize_samples
from pipeline.select.selection import build_benchmark, build_mixture
from pipeline.store import catalog, sql_shell, warehouse
from pipeline.store.duck import connect_file, open_data_root
from pipeline.store.layout import DataLayout
from pipeline.store.versions import SplitStore
from pipeline.training import bench_model, checkpoints
from tests.support.layouts import stratified_copy

ROOT = Path(__file__).resolve().parents[2]
RUN = "dagster-run-0001"


def _eval_rows(layout: DataLayout, version: str) -> Path:
    samples = pd.read_parquet(SplitStore(layout, "benchmark").samples(version))
    path = layout.root / "eval.jsonl"
    with path.open("w") as fh:
        for i, s in enumerate(samples.itertuples()):
            fh.write(
                json.dumps(
                    {
                        "run_id": f"oracle@{version}",
                        "simulator": "oracle",
                        "split_version": version,
                        "step_id": s.step_id,
                        "stratum": s.stratum,
                        "env_id": s.env_id,
                        "tool": s.tool,
                        "outcome": s.outcome,
                        "delta_size": s.delta_size,
                        "args_count": s.args_count,
                        "fm": True,
                        "cm": i % 2 == 0,
                        "cm_reference": True,
                        "parse_ok": True,
                        "seq": i,
                    }
                )
                + "\n"
            )
    return path


@pytest.fixture(scope="module")
def full_root(default_layout, tmp_path_factory):
    """A data root with every kind of table and view: two benchmark versions (the second made current by a
    Dagster run), a mixture, evaluation results, a curriculum table, checkpoints, bench-model runs and rollouts."""
    layout = stratified_copy(default_layout, tmp_path_factory.mktemp("schema") / "data")
    first = build_benchmark(layout, seed=0, on_shortfall="warn")
    second = build_benchmark(layout, seed=1, on_shortfall="warn", dagster_run_id=RUN)
    build_mixture(layout, {"failure": 5, "no_change": 5, "simple": 5}, seed=0)
    step = {
        "run_id": "r1",
        "simulator": "oracle",
        "rollout_id": "x",
        "step_index": 0,
        "delta_size": 0,
        "delta_bucket": "0",
        "fm": True,
        "cm": True,
        "drift": 0,
        "parse_ok": True,
    }
    rollout_store.write_run(layout, "r1", [step], [{"run_id": "r1", "rollout_id": "x", "status": "done", "steps": 1}])
    environment_report(layout)  # the quality gate's tables: env_quality, env_tool_quality, env_yield (two checkers)
    anchors = [SimulatorSpec(name="oracle", kind="oracle"), SimulatorSpec(name="no_change", kind="no_change")]
    environment_yield(layout, anchors, materialize_samples, YieldSettings(probes_per_env=2))
    with connect_file(layout.duckdb) as con:
        warehouse.sync(con, layout)
        results.load_run(con, _eval_rows(layout, second.version), f"oracle@{second.version}")
        curriculum.record(con, layout)
        checkpoints._schema(con)
        checkpoints._views(con)
        warehouse.ensure_table(con, "bench_model_runs")
        rollout_store.sync(con, layout)
        catalog.describe(con)
    return layout, first.version, second.version


def _objects(con):
    return sorted(
        r[0]
        for r in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE NOT internal UNION SELECT view_name FROM duckdb_views() "
            "WHERE NOT internal AND schema_name = 'main'"
        ).fetchall()
    )


def test_every_table_view_and_column_has_a_comment(full_root):
    layout, _, _ = full_root
    with open_data_root(layout.root) as con:
        names = _objects(con)
        assert {
            "steps",
            "strata",
            "trajectories",
            "environments",
            "benchmark_samples",
            "sft_mixture_samples",
            "split_versions",
            "split_members",
            "split_diff",
            "eval_results",
            "eval_results_strata",
            "eval_runs",
            "eval_by_group",
            "curriculum_groups",
            "sft_checkpoints",
            "bench_model_runs",
            "rollout_steps",
            "rollouts",
        } <= set(names)
        assert list(catalog.undocumented(con)) == []
        comment = con.execute(
            "SELECT comment FROM duckdb_columns() WHERE table_name = 'split_members' AND column_name = 'stratum'"
        ).fetchone()[0]
        assert "cell" in comment and "Balance2 group" in comment


def test_views_answer_after_the_data_root_moves(full_root, tmp_path):
    layout, _, _ = full_root
    moved = tmp_path / "elsewhere" / "data"
    shutil.copytree(layout.root, tmp_path / "copy")
    shutil.move(str(tmp_path / "copy"), str(moved))  # the original stays for the other tests; the copy moves
    new = DataLayout.at(moved)
    for read_only in (True, False):
        with open_data_root(moved, read_only=read_only) as con:
            views = [
                r[0]
                for r in con.execute(
                    "SELECT DISTINCT view_name FROM duckdb_views() WHERE NOT internal AND schema_name = 'main'"
                ).fetchall()
            ]
            assert len(views) >= 15
            for view in views:
                con.execute(f"SELECT count(*) FROM {view}").fetchone()
            assert con.execute("SELECT count(*) FROM steps").fetchone()[0] == 4625
            assert list(catalog.undocumented(con)) == []
    from resources.storage import DataStoreDuckDBResource, DataStoreResource

    resource = DataStoreDuckDBResource(store=DataStoreResource(data_root=str(new.root)))
    with resource.get_connection() as con:
        assert con.execute("SELECT count(*) FROM strata").fetchone()[0] == 4625
        assert (
            "'steps/part-*.parquet'"
            in con.execute("SELECT sql FROM duckdb_views() WHERE view_name = 'steps'").fetchone()[0]
        )


#: a plain client (a new Python process, no pipeline code, no settings): every view of the file, each one queried
PLAIN_CLIENT = """
import json, sys, duckdb
con = duckdb.connect(sys.argv[1], read_only=True)
where = "NOT internal AND schema_name = 'main'"
views = [r[0] for r in con.execute(f"SELECT view_name FROM duckdb_views() WHERE {where}").fetchall()]
failed = {}
for view in views:
    try:
        con.execute(f"SELECT count(*) FROM {view}").fetchone()
    except duckdb.Error as exc:
        failed[view] = str(exc).splitlines()[0]
sqls = [r[0] for r in con.execute("SELECT sql FROM duckdb_views() WHERE NOT internal").fetchall()]
print(json.dumps({"views": views, "failed": failed, "steps": con.execute("SELECT count(*) FROM steps").fetchone()[0],
                  "sql": sqls}))
"""


def _plain_client(database: str, cwd: Path) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", PLAIN_CLIENT, database], cwd=cwd, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_plain_client_answers_every_view_from_the_project_root_the_data_root_and_a_moved_root(full_root, tmp_path):
    """Issue 42, item 6: ``duckdb.connect('data/envsim.duckdb')`` from the project root (the data root's parent),
    ``duckdb.connect('envsim.duckdb')`` from the data root, the absolute path from anywhere else — and the same after
    the data root is moved (``mv data /elsewhere/data``) — answer every view; no view names the old root."""
    layout, _, _ = full_root
    root = tmp_path / "project" / "data"
    shutil.copytree(layout.root, root)
    moved = tmp_path / "elsewhere" / "data"
    elsewhere = tmp_path / "else"
    elsewhere.mkdir()
    places = [("data/envsim.duckdb", root.parent), ("envsim.duckdb", root), (str(root / "envsim.duckdb"), elsewhere)]
    answers = [_plain_client(database, cwd) for database, cwd in places]
    shutil.move(root, moved)
    places = [("data/envsim.duckdb", moved.parent), ("envsim.duckdb", moved), (str(moved / "envsim.duckdb"), elsewhere)]
    answers += [_plain_client(database, cwd) for database, cwd in places]
    for answer in answers:
        assert {
            "steps",
            "strata",
            "trajectories",
            "environments",
            "env_quality",
            "env_yield",
            "benchmark_samples",
            "sft_mixture_samples",
            "rollout_steps",
            "rollouts",
            "split_diff",
            "eval_results_strata",
        } <= set(answer["views"])
        assert answer["failed"] == {}
        assert answer["steps"] == 4625
        assert not [sql for sql in answer["sql"] if str(layout.root.resolve()) in sql or str(root) in sql]


def test_a_client_that_sets_file_search_path_resolves_the_views_there(full_root, tmp_path, monkeypatch):
    """The setting the pipeline's own connections use (and docs/sql.md names for a client whose ``temp_directory`` is
    set elsewhere) resolves the views against the root it names, from any directory."""
    import duckdb

    layout, _, _ = full_root
    monkeypatch.chdir(tmp_path)
    config = {"temp_directory": str(tmp_path / "spill")}
    with duckdb.connect(str(layout.duckdb), read_only=True, config=config) as con:
        with pytest.raises(duckdb.IOException, match="No files found"):
            con.execute("SELECT count(*) FROM strata").fetchone()
        con.execute(f"SET file_search_path = '{layout.root}'")
        assert con.execute("SELECT count(*) FROM strata").fetchone()[0] == 4625


def test_rows_of_a_version_name_it(full_root):
    layout, first, second = full_root
    with open_data_root(layout.root) as con:
        by_version = dict(con.execute("SELECT version, count(*) FROM benchmark_samples GROUP BY ALL").fetchall())
        assert set(by_version) == {first, second}
        mixture = SplitStore(layout, "sft_mixture").current()
        assert con.execute("SELECT DISTINCT version FROM sft_mixture_samples").fetchall() == [(mixture,)]
        assert "filename" not in [d[0] for d in con.execute("SELECT * FROM benchmark_samples LIMIT 0").description]


def test_split_versions_have_created_time_run_and_parent(full_root):
    layout, first, second = full_root
    with open_data_root(layout.root) as con:
        rows = {
            r[0]: r[1:]
            for r in con.execute(
                "SELECT version, created_at, dagster_run_id, parent_version, is_current FROM split_versions WHERE "
                "kind = 'benchmark'"
            ).fetchall()
        }
    assert rows[first][0] is not None and rows[first][1] is None and rows[first][2] is None and not rows[first][3]
    assert rows[second][0] >= rows[first][0] and rows[second][1:] == (RUN, first, True)


def test_provenance_stays_out_of_the_version_files(default_layout, tmp_path):
    """Same seed and input, same bytes: the created time and run live in history.jsonl, not in the version."""
    files = []
    for name, run in (("a", "run-a"), ("b", None)):
        layout = stratified_copy(default_layout, tmp_path / name)
        version = build_benchmark(layout, seed=3, on_shortfall="warn", dagster_run_id=run).version
        directory = SplitStore(layout, "benchmark").dir(version)
        files.append({p.name: p.read_bytes() for p in directory.iterdir()})
        assert SplitStore(layout, "benchmark").provenance()[version]["dagster_run_id"] == run
    assert files[0] == files[1]


def test_eval_results_with_bucket_and_cell(full_root):
    layout, _, second = full_root
    with open_data_root(layout.root) as con:
        rows = con.execute(
            "SELECT stratum, benchmark_group, delta_bucket, delta_size FROM eval_results_strata"
        ).fetchall()
    assert rows and all(bucket in {"0", "1-2", "3-6", "7-12", "13+"} for _, _, bucket, _ in rows)
    assert {(s, b) for s, _, b, _ in rows if s == "simple_1"} == {("simple_1", "1-2")}
    assert {g for s, g, _, _ in rows if s.startswith("no_change")} == {"no_change"}


def test_split_diff_lists_added_and_removed_samples(full_root):
    layout, first, second = full_root
    a = set(pd.read_parquet(SplitStore(layout, "benchmark").samples(first))["step_id"])
    b = set(pd.read_parquet(SplitStore(layout, "benchmark").samples(second))["step_id"])
    with open_data_root(layout.root) as con:
        diff = con.execute(
            "SELECT change, step_id FROM split_diff WHERE version_a = ? AND version_b = ?", [first, second]
        ).fetchall()
    assert {s for c, s in diff if c == "added"} == b - a and {s for c, s in diff if c == "removed"} == a - b
    assert b - a


def _cookbook() -> list[str]:
    text = (ROOT / "docs" / "sql.md").read_text()
    section = text[text.index("## SQL cookbook") :]
    section = section[: section.index("\n## ", 4)] if "\n## " in section[4:] else section
    blocks = re.findall(r"```sql\n(.*?)```", section, re.S)
    return [q.strip() for block in blocks for q in block.split(";") if re.sub(r"--[^\n]*", "", q).strip()]


def test_every_cookbook_query_runs(full_root):
    layout, first, second = full_root
    queries = _cookbook()
    text = " ".join(queries)
    for needed in (
        "duckdb_columns()",
        "split_diff",
        "eval_results_strata",
        "parent_version",
        "env_yield",
        "env_tool_quality",
    ):
        assert needed in text, f"the cookbook has no query using {needed}"
    with open_data_root(layout.root) as con:
        for query in queries:
            query = query.replace("bench-AAAA", first).replace("bench-BBBB", second)
            rows = con.execute(query).fetchall()
            assert rows, f"no rows: {query}"


# ---- ./forge sql -----------------------------------------------------------------------------------------------


def _forge_sql(*args: str, cwd: Path, stdin: str | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("ENVSIM_")}
    return subprocess.run(
        [str(ROOT / "forge"), "sql", *args],
        cwd=cwd,
        env={**environment, **env},
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_forge_sql_runs_a_query_on_the_data_root_from_another_directory(full_root, tmp_path):
    """``./forge sql QUERY`` (or ``-c QUERY``) from anywhere, on the root ``ENVSIM_DATA_ROOT`` names (or
    ``--data-root``): the result as a table, exit 0; a wrong query: DuckDB's error, exit 1; no data there: one
    line, exit 2."""
    layout, _, _ = full_root
    done = _forge_sql("SELECT count(*) AS n FROM steps", cwd=tmp_path, ENVSIM_DATA_ROOT=str(layout.root))
    assert done.returncode == 0, done.stderr
    assert "4625" in done.stdout and re.search(r"│ +n +│", done.stdout)
    done = _forge_sql("--data-root", str(layout.root), "SELECT count(*) AS n FROM strata", cwd=tmp_path)
    assert done.returncode == 0 and "4625" in done.stdout, done.stderr
    done = _forge_sql("-c", "SELECT count(*) AS n FROM strata", cwd=tmp_path, ENVSIM_DATA_ROOT=str(layout.root))
    assert done.returncode == 0 and "4625" in done.stdout, done.stderr  # -c, as the duckdb and psql shells take it
    done = _forge_sql("-c", "SELECT 1", "SELECT 2", cwd=tmp_path, ENVSIM_DATA_ROOT=str(layout.root))
    assert done.returncode == 2 and "give the SQL once" in done.stderr
    done = _forge_sql("SELECT nope FROM steps", cwd=tmp_path, ENVSIM_DATA_ROOT=str(layout.root))
    assert done.returncode == 1 and 'Referenced column "nope" not found' in done.stderr
    done = _forge_sql("SELECT 1", cwd=tmp_path, ENVSIM_DATA_ROOT=str(tmp_path / "empty"))
    assert done.returncode == 2 and not done.stdout
    assert done.stderr.strip() == (
        f"./forge sql: no envsim.duckdb in {tmp_path / 'empty'}: ./forge run makes it "
        "(or name the root: --data-root DIR)"
    )


def test_forge_sql_reads_statements_from_standard_input(full_root, tmp_path):
    layout, _, _ = full_root
    statements = "SELECT count(*) AS n\nFROM steps;\n.tables\nSELECT nope;\nSELECT 7 AS seven;\n"
    done = _forge_sql(cwd=tmp_path, stdin=statements, ENVSIM_DATA_ROOT=str(layout.root))
    assert done.returncode == 1  # a statement failed; the others ran
    assert "4625" in done.stdout and "split_versions" in done.stdout and "│ seven" in done.stdout
    assert "nope" in done.stderr


def test_the_summary_prints_a_sql_command_that_works_when_pasted(full_root, tmp_path):
    """The summary's ``SQL:`` command, pasted in the repository root (where ``./forge`` is), answers on that root."""
    layout, _, _ = full_root
    command = sql_shell.command(layout.root)
    assert command == f"./forge sql --data-root {layout.root.resolve()}"
    done = subprocess.run(
        f"{command} 'SELECT count(*) AS n FROM strata'",
        shell=True,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0 and "4625" in done.stdout, done.stderr
    assert sql_shell.command(ROOT / "data") == "./forge sql"  # the default root (./forge runs in the repository)


def test_the_prompt_runs_statements_across_lines_and_survives_an_error(full_root, monkeypatch, capsys):
    """The prompt of its own (no ``duckdb`` CLI of the library's version): a statement ends with ``;``, an error is
    printed and the prompt goes on, ``.tables`` lists the tables and views, ``.quit`` leaves."""
    layout, _, _ = full_root
    lines = iter(["SELECT count(*)", "AS n FROM steps;", "SELECT nope;", ".tables", "SELECT 7 AS seven;", ".quit"])
    prompts = []

    def typed(prompt: str) -> str:
        prompts.append(prompt)
        return next(lines)

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr("builtins.input", typed)
    with open_data_root(layout.root) as con:
        assert sql_shell.repl(con, layout.duckdb, Terminal()) == 0
    out = capsys.readouterr()
    assert prompts == [
        sql_shell.PROMPT,
        sql_shell.MORE,
        sql_shell.PROMPT,
        sql_shell.PROMPT,
        sql_shell.PROMPT,
        sql_shell.PROMPT,
    ]
    assert "4625" in out.out and "split_members" in out.out and "│ seven" in out.out and "nope" in out.err


def test_the_duckdb_cli_is_used_only_at_the_librarys_version(tmp_path, monkeypatch):
    """A ``duckdb`` CLI of another version may not read the file (DuckDB's storage version): then the own prompt."""
    import duckdb

    cli = tmp_path / "duckdb"
    monkeypatch.setenv("PATH", str(tmp_path))
    major_minor = ".".join(duckdb.__version__.split(".")[:2])
    for version, used in ((f"v{major_minor}.9 (Name) abc", True), ("v0.9.2 (Name) abc", False)):
        cli.write_text(f"#!/bin/sh\necho '{version}'\n")
        cli.chmod(0o755)
        assert sql_shell._duckdb_cli() == (str(cli) if used else None)
