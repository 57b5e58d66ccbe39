"""What the run summary prints is there (issue 43, items 5 and 6): every path it names exists, the environment
counts reconcile the catalog with the steps and the quality report (naming the environments without steps, which
claim no determinism), each split table explains its ``available``, and the README's sample header is the one
printed."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pytest

from cli.summary import summary
from pipeline.quality.environment_report import UNTESTED, environment_report
from pipeline.select.selection import build_benchmark, build_mixture
from pipeline.store import queries, warehouse
from pipeline.store.versions import BENCHMARK, MIXTURE, split_kind
from tests.support.layouts import stratified_copy

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def printed(default_layout, tmp_path_factory):
    """The bfcl replay with the full catalog (the builtin pack has no steps here), its splits and quality report,
    and what ``summary`` prints of it."""
    layout = stratified_copy(default_layout, tmp_path_factory.mktemp("summary") / "data")
    build_benchmark(layout, seed=0, on_shortfall="warn")
    build_mixture(layout, {"failure": 5, "no_change": 50, "simple": 50, "complex": 20}, seed=0)
    environment_report(layout)
    with duckdb.connect(str(layout.duckdb)) as con:  # what step_strata and the splits do in a run
        warehouse.sync(con, layout)
    return layout


def _out(layout, capsys) -> str:
    summary(layout)
    captured = capsys.readouterr()
    return captured.out


def test_every_path_the_summary_prints_exists(printed, capsys):
    out = _out(printed, capsys)
    root = str(printed.root)
    paths = {m.rstrip(",;:)") for m in re.findall(rf"{re.escape(root)}[^\s(]*", out)}
    assert str(printed.env_quality) in paths  # the quality line names the file, not only its name
    assert len(paths) > 5
    for path in paths:
        if "*" in path:  # the steps' glob
            assert list(Path(path).parent.glob(Path(path).name)), path
        else:
            assert Path(path).exists(), path


def test_the_environment_counts_reconcile_and_name_the_untested(printed, capsys):
    out = _out(printed, capsys)
    listed, stepped = queries.environment_ids(printed)
    in_both, without = set(listed) & set(stepped), sorted(set(listed) - set(stepped))
    composites = set(stepped) - set(listed)
    assert without and composites  # the builtin pack has no steps; bfcl tasks run classes together
    headline = next(line for line in out.splitlines() if " steps from " in line)
    assert f", {len(stepped)} environments, " in headline
    (counts,) = [line for line in out.splitlines() if line.startswith("  environments: ")]
    assert counts.startswith(
        f"  environments: {len(stepped)} with steps = {len(in_both)} of the catalog's {len(listed)} "
        f"+ {len(composites)} composites"
    )
    assert f"the catalog's other {len(without)} have no steps of their own: " in counts
    for env in without[:8]:
        assert env in counts
    (quality,) = [line for line in out.splitlines() if line.startswith("Environment quality (")]
    total = len(set(listed) | set(stepped))
    assert (
        f" of {total} environments pass" in quality
        and f"({len(stepped)} with steps, {len(without)} without)" in quality
    )
    for env in without[:8]:
        assert env in quality
    con = duckdb.connect()
    rows = dict(
        con.execute(
            "SELECT env_id, determinism FROM read_parquet(?) WHERE steps = 0", [str(printed.env_quality)]
        ).fetchall()
    )
    assert sorted(rows) == without and set(rows.values()) == {UNTESTED}  # no claim of determinism without steps
    assert con.execute(
        "SELECT count(*) FROM read_parquet(?) WHERE steps > 0 AND determinism = 'untested'", [str(printed.env_quality)]
    ).fetchone() == (0,)


def test_each_split_table_explains_available_and_the_readme_header_is_printed(printed, capsys):
    out = _out(printed, capsys)
    lines = out.splitlines()
    for kind in (BENCHMARK, MIXTURE):
        start = next(i for i, line in enumerate(lines) if line.startswith(f"{kind}: current "))
        table = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("| stratum "))
        table_end = next(i for i in range(table, len(lines)) if not lines[i].startswith("|"))
        assert lines[table_end] == split_kind(kind).summary_note
    readme = (ROOT / "README.md").read_text()
    sample = next(line for line in readme.splitlines() if line.startswith("| cell | quota | candidates"))
    printed_header = next(line for line in lines if line.startswith("| cell "))
    assert [c.strip() for c in printed_header.strip("|").split("|")] == [
        c.strip() for c in sample.strip("|").split("|")
    ]
