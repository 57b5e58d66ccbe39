"""The data contract: every documented value set — the dataset card's Data Fields, the DuckDB column comments, the
Dagster column descriptions and the docs — is the one glossary's (``pipeline/store/glossary.py``), and the data of a
real run (bfcl replay, the builtin pack, an EnvScaler-format corpus: every source, both adapters) holds exactly
those values: ``WHERE delta_bucket = '<a documented label>'`` finds the rows it names."""

import json
import re
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow.parquet as pq
import pytest

from pipeline.collect.explore import ExploreSettings
from pipeline.collect.run import collect_all
from pipeline.collect.sources import SourceConfig, env_items
from pipeline.core.strata import Cell
from pipeline.envs import registry
from pipeline.envs.bfcl_tasks import BfclTaskFile, default_task_files
from pipeline.envs.catalog import build_catalog
from pipeline.envs.config import EnvScalerCorpus
from pipeline.envs.registry import sources_config
from pipeline.export.hf_layout import export_split
from pipeline.labeling.steps import label
from pipeline.select.selection import build_benchmark, build_mixture
from pipeline.select.stratify import stratify
from pipeline.store import catalog, glossary, warehouse
from pipeline.store.duck import open_data_root
from pipeline.store.layout import DataLayout
from pipeline.store.schema import COLUMN_DOCS
from pipeline.store.versions import BENCHMARK, MIXTURE, SplitStore
from tests.support.envscaler_corpus import COUNTER_CODE, ITEMS

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
#: the closed-set columns of each table of a run (where the table has them)
TABLES = ("steps", "trajectories", "strata", "benchmark_samples", "sft_mixture_samples")


def _bfcl_subset(directory: Path, n: int = 6) -> BfclTaskFile:
    """The first ``n`` tasks of bfcl's base category, as a task file of their own."""
    base = default_task_files(("base",))[0]
    tasks = directory / "tasks.json"
    answers = directory / "answers.json"
    tasks.write_text("".join(base.tasks.read_text().splitlines(keepends=True)[:n]))
    answers.write_text("".join(base.answers.read_text().splitlines(keepends=True)[:n]))
    return BfclTaskFile(tasks, answers, "base")


def _corpus(directory: Path) -> EnvScalerCorpus:
    """One EnvScaler-format environment (the counter shop) with three scenarios."""
    items = {"counter_shop": ITEMS["counter_shop"]}
    scenarios = [
        {
            "task_id": f"shop-{i}",
            "env_id": "counter_shop",
            "env_class_name": "CounterShop",
            "init_config": {"stock": {"apple": 3 + i, "pear": i}, "till": 0},
            "task": "Sell fruit.",
        }
        for i in range(3)
    ]
    (directory / "191_env_metadata.json").write_text(json.dumps(items))
    (directory / "scenarios.json").write_text(json.dumps(scenarios))
    assert "class CounterShop" in COUNTER_CODE
    return EnvScalerCorpus(
        env_items=directory / "191_env_metadata.json", scenarios=directory / "scenarios.json", license="CC0-1.0"
    )


@pytest.fixture(scope="module")
def run(tmp_path_factory, sandbox):
    """A small real run of every source: collected, labeled, stratified, both splits built and exported, and the
    DuckDB file synced."""
    tmp = tmp_path_factory.mktemp("contract")
    layout = DataLayout.at(tmp / "data")
    cfg = sources_config(
        bfcl={"categories": [], "task_files": [_bfcl_subset(tmp)]},
        builtin={"scenarios_per_env": 2},
        envscaler=[_corpus(tmp)],
    )
    items, issues = env_items(cfg)
    build_catalog(layout, items, issues)
    collect_all(cfg, layout, sandbox, ExploreSettings(call_budget=1500, batch_episodes=40))
    label(layout, sandbox)
    stratify(layout)
    # a small benchmark (a few tasks), so that task decontamination leaves the mixture its candidates
    build_benchmark(
        layout,
        [
            Cell("failure", "failure", 2, "failure", 0, 0),
            Cell("no_change", "no_change", 2, "success", 0, 0),
            Cell("simple", "simple", 2, "success", 1, 2),
        ],
        seed=0,
        on_shortfall="warn",
    )
    build_mixture(layout, {"failure": 5, "no_change": 20, "simple": 20, "complex": 5}, seed=0, on_shortfall="warn")
    exports = {
        kind: export_split(layout, kind, None, tmp / "hf" / kind, max_shard_bytes=200_000)
        for kind in (BENCHMARK, MIXTURE)
    }
    con = open_data_root(layout.root, read_only=False)
    warehouse.sync(con, layout)
    yield layout, exports, con
    con.close()


def _backticked(text: str) -> set[str]:
    return set(re.findall(r"`([^`]+)`", text))


def _distinct(con, table: str, column: str) -> set[str]:
    return {r[0] for r in con.execute(f"SELECT DISTINCT {column} FROM {table} WHERE {column} IS NOT NULL").fetchall()}


def _columns(con, table: str) -> set[str]:
    return {
        r[0] for r in con.execute("SELECT column_name FROM duckdb_columns() WHERE table_name = ?", [table]).fetchall()
    }


def test_the_glossary_derives_the_sets_from_the_rules_and_the_registry():
    assert glossary.values("delta_bucket") == ("0", "1-2", "3-6", "7-12", "13+")
    assert glossary.values("args_cardinality") == ("0", "1", "2", "3+")
    assert glossary.values("outcome") == ("success", "failure", "error", "sandbox_refused")
    assert glossary.values("source") == registry.names() == ("bfcl", "builtin", "envscaler", "served")
    assert glossary.values("adapter") == registry.ADAPTERS.names() == ("bfcl", "envscaler")
    assert glossary.values("balance2_group") == ("failure", "no_change", "simple", "complex")
    assert glossary.values("benchmark_group") == ("failure", "no_change", "simple", "medium", "difficult")
    assert glossary.values("benchmark_cell")[0] == "failure" and glossary.values("benchmark_cell")[-1] == "difficult"
    # every documented description of a closed-set column names exactly its set (no bucket role, no stale name)
    for column in glossary.closed_columns():
        for text in (COLUMN_DOCS.get(column), catalog.COLUMNS.get(column)):
            if text is not None:
                assert _backticked(text) <= set(glossary.documented_values(column)) | {"envscaler"}, (column, text)
                assert set(glossary.values(column)) <= _backticked(text), (column, text)


def test_a_new_source_is_documented_as_it_registers():
    from tests.envs.toy_source import ToySource

    source = registry.register(ToySource(tasks=1))
    try:
        assert "`toy`" in COLUMN_DOCS["source"] and "toy" in glossary.values("source")
    finally:
        registry.unregister(source.name)
    assert "toy" not in glossary.values("source") and "`toy`" not in COLUMN_DOCS["source"]


def test_the_data_holds_exactly_the_documented_values(run):
    layout, _, con = run
    for table in TABLES:
        present = _columns(con, table)
        assert present, table
        for column in glossary.closed_columns():
            if column in present:
                held = _distinct(con, table, column)
                assert held <= set(glossary.documented_values(column)), (table, column, held)
    # source is the source, named by the environment id's prefix (the builtin pack is `builtin`, not its adapter)
    assert _distinct(con, "steps", "source") == {"bfcl", "builtin", "envscaler"}
    assert con.execute("SELECT count(*) FROM steps WHERE source <> split_part(env_id, '/', 1)").fetchone()[0] == 0
    assert (
        con.execute("SELECT count(*) FROM trajectories WHERE source <> split_part(env_id, '/', 1)").fetchone()[0] == 0
    )
    assert _distinct(con, "steps", "adapter") == set(registry.ADAPTERS.names())
    assert con.execute("SELECT DISTINCT adapter FROM steps WHERE source = 'builtin'").fetchall() == [("envscaler",)]
    assert con.execute("SELECT count(*) FROM steps WHERE adapter IS NULL").fetchone()[0] == 0
    # a documented label finds its rows: the buckets the run reaches are queryable by their documented names
    for label_ in ("0", "1-2", "3-6"):
        assert label_ in glossary.values("delta_bucket")
        assert con.execute("SELECT count(*) FROM strata WHERE delta_bucket = ?", [label_]).fetchone()[0] > 0, label_
    held = _distinct(con, "strata", "balance2_group")
    assert held and held <= set(glossary.values("balance2_group"))


def test_the_exported_dataset_holds_the_values_its_card_documents(run):
    _, exports, _ = run
    for kind, report in exports.items():
        directory = Path(report.directory) if hasattr(report, "directory") else Path(report)
        files = sorted((directory / "data").glob("*.parquet"))
        assert files, kind
        frame = pd.concat([pd.read_parquet(f) for f in files])
        card = (directory / "README.md").read_text()
        fields = card.split("\n## Data Fields\n", 1)[1].split("\n## ", 1)[0]
        lines = {
            re.match(r"- `([^`]+)`", line).group(1): line for line in fields.splitlines() if line.startswith("- `")
        }
        assert set(lines) == set(pq.read_schema(files[0]).names), kind
        for column in glossary.closed_columns():
            if column not in frame.columns:
                continue
            held = set(frame[column].dropna())
            assert held <= set(glossary.documented_values(column)), (kind, column, held)
            assert lines[column].endswith(COLUMN_DOCS[column]), (kind, column)
            assert set(glossary.values(column)) <= _backticked(lines[column]), (kind, column)
        assert set(frame["source"]) <= set(registry.names()) and set(frame["adapter"]) <= set(registry.ADAPTERS.names())


def test_every_duckdb_comment_of_a_closed_set_column_is_the_glossarys(run):
    _, _, con = run
    rows = con.execute(
        """SELECT table_name, column_name, comment FROM duckdb_columns()
                          WHERE column_name IN (SELECT unnest(?))""",
        [list(glossary.closed_columns())],
    ).fetchall()
    assert {c for _, c, _ in rows} >= {
        "outcome",
        "delta_bucket",
        "args_cardinality",
        "source",
        "adapter",
        "benchmark_cell",
        "balance2_group",
        "kind",
    }
    for table, column, comment in rows:
        assert comment == catalog.column_description(table, column), (table, column)
        assert set(glossary.values(column)) <= _backticked(comment), (table, column, comment)
    # the issue's query: a documented label, not a bucket role
    assert "`none`" not in catalog.COLUMNS["delta_bucket"] and "`difficult`" not in catalog.COLUMNS["delta_bucket"]


def _listing(text: str, anchor: str) -> list[str]:
    """The backticked values listed right after ``anchor`` in ``text`` (up to the end of its sentence or
    parenthesis)."""
    at = text.index(anchor) + len(anchor)
    end = min(i for i in (text.find(").", at), text.find(";", at), text.find(")", at)) if i >= 0)
    return re.findall(r"`([^`]+)`", text[at:end])


@pytest.mark.parametrize(
    "doc, anchor, column",
    [
        ("docs/definitions.md", "Buckets of |Δ| (the `delta_bucket` columns):", "delta_bucket"),
        ("docs/sql.md", "a `delta_bucket` is a |Δ| range (", "delta_bucket"),
        ("docs/pipeline.md", "The \\|Δ\\| buckets (the `delta_bucket` labels", "delta_bucket"),
        ("docs/environments.md", "a **source** is where environments come from (", "source"),
        ("docs/environments.md", "an **adapter** is how an\nenvironment is built and run in the sandbox (", "adapter"),
        ("docs/extending.md", "A **source** is where environments come from (", "source"),
        ("docs/definitions.md", "or a Balance2 group", "balance2_group"),
    ],
)
def test_hand_written_docs_list_the_glossarys_values(doc, anchor, column):
    listed = _listing((ROOT / doc).read_text(), anchor)
    assert listed == list(glossary.values(column)), (doc, listed)


def test_a_process_without_the_registry_writes_no_wrong_source_set(run, tmp_path):
    """A script that opens the data root without loading the environment registry does not know the sources: its
    comment on ``source`` is the column's meaning, without a value set (never an empty or stale one); the pipeline's
    processes, which load the registry, write the set."""
    import shutil
    import subprocess
    import sys

    layout, _, _ = run
    copy = tmp_path / "root"
    shutil.copytree(layout.root, copy)
    script = (
        "import sys; from pipeline.store.duck import open_data_root\n"
        f"con = open_data_root({str(copy)!r}, read_only=False)\n"
        "print(con.execute(\"SELECT comment FROM duckdb_columns() WHERE table_name = 'steps' AND column_name = "
        "'source'\").fetchone()[0])\n"
        "assert 'pipeline.envs.registry' not in sys.modules"
    )
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == COLUMN_DOCS.meanings["source"] and "`" not in out.stdout
    with open_data_root(copy, read_only=False) as con:  # this process knows the registry: the set is back
        comment = con.execute(
            "SELECT comment FROM duckdb_columns() WHERE table_name = 'steps' AND column_name = 'source'"
        ).fetchone()[0]
    assert comment == COLUMN_DOCS["source"] and "`builtin`" in comment
