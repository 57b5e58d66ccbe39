"""A split kind made from outside the tree: one :class:`SplitKind` record registered by a test (as a plugin's
``envsim_forge.split_kinds`` entry point would) gives the kind its store and version ids, its DuckDB samples view and
glossary value, its Hugging Face export and its lines in the run's summary, with no module of the project changed."""

from __future__ import annotations

import duckdb
import pandas as pd
import pytest

from cli.summary import report_splits
from pipeline.export.hf_layout import export_split
from pipeline.select.selection import select_strata, write_version
from pipeline.store import glossary, warehouse
from pipeline.store.duck import connect
from pipeline.store.kinds import SPLIT_KINDS, SplitKind
from pipeline.store.versions import SplitStore, version_id
from tests.support.layouts import stratified_copy

HOLDOUT = SplitKind(
    "holdout",
    "hold",
    "held-out split",
    hf_split="validation",
    composition_note="and only reads and single changes are drawn",
    spec_provenance=(("drawn by", "rule"),),
    summary_note="holdout: reads and single-change steps, drawn apart from the benchmark",
)


@pytest.fixture(scope="module")
def holdout(default_layout, tmp_path_factory):
    """A ``holdout`` kind registered for this module, and one version of it written the way a kind's own asset
    writes one (``select_strata`` then ``write_version``): (layout, version, picks)."""
    SPLIT_KINDS.register(HOLDOUT)
    try:
        layout = stratified_copy(default_layout, tmp_path_factory.mktemp("holdout") / "data")
        spec = {"seed": 3, "input": "test", "rule": "reads and single changes"}
        strata = [("reads", "delta_size = 0", 6), ("single", "delta_size = 1", 4)]
        with connect() as con:
            picks, table, tools, _ = select_strata(con, layout, strata, seed=3)
        version = version_id(HOLDOUT.name, spec)
        write_version(HOLDOUT.name, layout, version, spec, picks, table, "warn", make_current=True, tools=tools)
        with duckdb.connect(str(layout.duckdb)) as con:
            warehouse.sync(con, layout)
        yield layout, version, picks
    finally:
        SPLIT_KINDS.unregister(HOLDOUT.name)


def test_the_kind_gets_its_store_version_ids_and_glossary_value(holdout):
    layout, version, picks = holdout
    assert version.startswith("hold-") and len(picks) == 10
    store = SplitStore(layout, "holdout")
    assert store.current() == version and store.versions() == [version]
    assert store.root == layout.root / "splits" / "holdout"
    assert sorted(pd.read_parquet(store.samples(version))["step_id"]) == sorted(step for step, _ in picks)
    assert "holdout" in glossary.values("kind")


def test_the_kind_gets_its_duckdb_samples_view(holdout):
    layout, version, picks = holdout
    with duckdb.connect(str(layout.duckdb), read_only=True) as con:
        rows = con.execute("SELECT version, count(*) FROM holdout_samples GROUP BY 1").fetchall()
        kinds = con.execute("SELECT kind, version FROM split_versions WHERE kind = 'holdout'").fetchall()
    assert rows == [(version, len(picks))]
    assert kinds == [("holdout", version)]


def test_the_kind_gets_its_export_in_its_own_split(holdout, tmp_path):
    from datasets import load_dataset

    layout, version, picks = holdout
    report = export_split(layout, "holdout", None, tmp_path / "holdout")
    assert (report.version, report.split, report.rows) == (version, "validation", len(picks))
    ds = load_dataset("parquet", data_files={"validation": str(tmp_path / "holdout" / "data" / "*.parquet")})
    assert ds["validation"].num_rows == len(picks)
    card = (tmp_path / "holdout" / "README.md").read_text()
    assert f"held-out split `{version}`" in card
    assert "and only reads and single changes are drawn" in card
    assert "drawn by" in card and "reads and single changes" in card
    assert not (tmp_path / "holdout" / "sft").exists()  # not an SFT kind: no chat / alpaca records


def test_the_kind_gets_its_summary_lines(holdout, capsys):
    layout, version, picks = holdout
    report_splits(layout)
    out = capsys.readouterr().out
    assert f"holdout: current {version} ({len(picks)} samples, seed 3, 0 shortfalls)" in out
    lines = out.splitlines()
    table = lines.index(next(line for line in lines if line.startswith("| stratum ")))
    assert {"reads", "single"} <= {line.split("|")[1].strip() for line in lines[table + 2 : table + 4]}
    assert HOLDOUT.summary_note in lines[table + 4 :]
