"""Stratification, versioned benchmark splits, the Balance2 mixture, their checks and DuckDB."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from dagster import DagsterInstance, build_schedule_context, build_sensor_context, materialize

from pipeline.core.strata import Cell, Composition
from pipeline.quality.suites import composition_suite, overlap_suite, step_table_suite
from pipeline.select.selection import ShortfallError, build_benchmark, build_mixture
from pipeline.select.stratify import EmptyStepTable, stratify
from pipeline.store import warehouse
from pipeline.store.layout import DataLayout
from pipeline.store.versions import BENCHMARK, EmptySelection, SplitStore, UnknownVersion
from tests.support.layouts import stratified_copy

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bfcl_layout(default_layout, tmp_path_factory):
    """A private copy of the 800-task bfcl data (it has no |Δ| 4, 6 or 7-12 steps)."""
    layout = stratified_copy(default_layout, tmp_path_factory.mktemp("sel") / "data")
    return layout


def test_strata_table_labels_every_step(bfcl_layout):
    df = duckdb.sql(f"SELECT * FROM read_parquet('{bfcl_layout.root}/strata/strata.parquet')").df()
    assert len(df) == 4625
    assert set(df["delta_bucket"]) == {"0", "1-2", "3-6"}
    assert set(df["args_cardinality"]) <= {"0", "1", "2", "3+"}
    assert df["sample_hash"].str.len().eq(32).all()
    assert not df["excluded"].any()  # ground truth never errors


def test_shortfalls_are_reported_per_cell_or_fail(bfcl_layout):
    with pytest.raises(
        ShortfallError, match=r"medium_4 \(\|Δ\| 4\): 0 of 50, no candidate in the corpus \(max \|Δ\| 5\)"
    ):
        build_benchmark(bfcl_layout, seed=1, on_shortfall="fail")
    result = build_benchmark(bfcl_layout, seed=1, on_shortfall="warn")
    missing = {s["stratum"]: s["missing"] for s in result.shortfalls}
    # bfcl ground truth: no |Δ| 4, 6 or 7-12 steps, and its 16 failures are only 10 distinct (s_t, a_t)
    assert missing == {"failure": 10, "medium_4": 50, "medium_6": 50, "difficult": 50}
    assert result.samples == 400 - 160
    assert composition_suite(result.strata).success  # selected == min(requested, available)


def test_impossible_custom_cell_is_reported(bfcl_layout):
    cells = [Cell("huge_failures", "failure", 5, "failure", 3, 9)]
    with pytest.raises(
        ShortfallError,
        match=r"huge_failures \(failure, \|Δ\| 3–9\): 0 of 5, max \|Δ\| of failure steps in the corpus 0 — fix: ",
    ):
        build_benchmark(bfcl_layout, cells, seed=0, on_shortfall="fail", make_current=False)
    # even with on_shortfall="warn", a selection with no sample at all is no version
    with pytest.raises(
        EmptySelection,
        match=r"selects no sample: no usable step matches any stratum; asked for huge_failures 5 \(0 candidates\)",
    ):
        build_benchmark(bfcl_layout, cells, seed=0, on_shortfall="warn", make_current=False)
    cells.append(Cell("no_change", "no_change", 3, "success", 0, 0))
    result = build_benchmark(bfcl_layout, cells, seed=0, on_shortfall="warn", make_current=False)
    assert result.shortfalls == [
        {"stratum": "huge_failures", "requested": 5, "available": 0, "selected": 0, "environments": 0, "missing": 5}
    ]


def test_a_version_selected_again_keeps_its_samples_unless_they_are_not_the_bytes_written(bfcl_layout, monkeypatch):
    """The same seed on the same data selects the same version: its samples are not rebuilt (no replay), unless the
    file was changed or removed since, when they are written again to the same bytes."""
    from pipeline.select import samples

    first = build_benchmark(bfcl_layout, seed=21, on_shortfall="warn", make_current=False)
    path = SplitStore(bfcl_layout, BENCHMARK).samples(first.version)
    written = path.read_bytes()
    calls: list[int] = []
    real = samples.materialize_samples
    monkeypatch.setattr(samples, "materialize_samples", lambda *a: calls.append(1) or real(*a))
    assert build_benchmark(bfcl_layout, seed=21, on_shortfall="warn", make_current=False).version == first.version
    assert calls == [] and path.read_bytes() == written
    path.write_bytes(written[:-8] + b"\0" * 8)  # the same size, not the bytes written
    build_benchmark(bfcl_layout, seed=21, on_shortfall="warn", make_current=False)
    path.unlink()
    build_benchmark(bfcl_layout, seed=21, on_shortfall="warn", make_current=False)
    assert calls == [1, 1] and path.read_bytes() == written


def test_same_seed_same_bytes_new_seed_new_version(bfcl_layout, tmp_path):
    a = build_benchmark(bfcl_layout, seed=11, on_shortfall="warn")
    store = SplitStore(bfcl_layout, BENCHMARK)
    ids_a = (store.dir(a.version) / "sample_ids.txt").read_bytes()
    parquet_a = store.samples(a.version).read_bytes()
    b = build_benchmark(bfcl_layout, seed=11, on_shortfall="warn")
    assert b.version == a.version
    assert (store.dir(b.version) / "sample_ids.txt").read_bytes() == ids_a
    assert store.samples(b.version).read_bytes() == parquet_a
    c = build_benchmark(bfcl_layout, seed=12, on_shortfall="warn")
    assert c.version != a.version and store.current() == c.version
    con = duckdb.connect(str(tmp_path / "w.duckdb"))
    warehouse.sync(con, bfcl_layout)
    versions = dict(con.execute("SELECT version, is_current FROM split_versions WHERE kind = 'benchmark'").fetchall())
    assert versions[a.version] is False and versions[c.version] is True  # the old one stays queryable
    only_in_a = con.execute(
        """SELECT count(*) FROM split_members a WHERE a.version = ? AND a.step_id NOT IN
           (SELECT step_id FROM split_members WHERE version = ?)""",
        [a.version, c.version],
    ).fetchone()[0]
    assert 0 < only_in_a <= a.samples


def test_samples_carry_full_states_code_and_labels(bfcl_layout):
    result = build_benchmark(bfcl_layout, seed=3, on_shortfall="warn")
    df = pd.read_parquet(result.path)
    # rows in the order of the labeled data; `position` is the pick order that sample_ids.txt lists
    stored = {
        tid: i
        for i, tid in enumerate(
            pd.concat(pd.read_parquet(f, columns=["trajectory_id"]) for f in bfcl_layout.trajectory_files())[
                "trajectory_id"
            ]
        )
    }
    keys = [(stored[t], s) for t, s in zip(df["trajectory_id"], df["step_index"])]
    assert keys == sorted(keys)
    assert sorted(df["position"]) == list(range(len(df)))
    ids = (Path(result.path).parent / "sample_ids.txt").read_text().split()
    assert list(df.sort_values("position")["step_id"]) == ids
    row = df[df["delta_size"] > 0].iloc[0]
    assert row["state_before_json"] != row["state_after_json"]
    assert f"def {row['tool']}(" in row["code"]
    assert len(row["delta"]) == row["delta_size"]
    assert df.groupby("stratum")["env_id"].nunique().min() >= 1
    # max environment coverage: the 40 no_change/0-arg picks spread over every env that has one
    envs_available = (
        duckdb.connect()
        .execute(
            f"SELECT count(DISTINCT env_id) FROM read_parquet('{bfcl_layout.root}/strata/strata.parquet') "
            "WHERE outcome='success' AND delta_size=0 AND args_count=0"
        )
        .fetchone()[0]
    )
    assert df[df["stratum"] == "no_change_args0"]["env_id"].nunique() == min(envs_available, 40)


@pytest.mark.parametrize("mode", ["trajectory", "task_id", "env_id"])
def test_mixture_never_overlaps_the_benchmark(bfcl_layout, mode):
    if mode != "env_id":
        bench = build_benchmark(bfcl_layout, seed=5, on_shortfall="warn")
    else:  # the full benchmark spans every bfcl environment: by env_id it would leave nothing (EmptySelection)
        bench = build_benchmark(bfcl_layout, [Cell("few", "simple", 2, "success", 1, 1)], seed=5, make_current=False)
    mix = build_mixture(
        bfcl_layout,
        {"failure": 5, "no_change": 200, "simple": 200, "complex": 50},
        seed=5,
        decontaminate=mode,
        benchmark_version=bench.version,
    )
    assert mix.spec["benchmark"] == bench.version
    assert overlap_suite(mix.path, bench.path, mode).success
    m, b = pd.read_parquet(mix.path), pd.read_parquet(bench.path)
    assert len(m) > 0 and len(b) > 0
    key = {"trajectory": "trajectory_id"}.get(mode, mode)
    assert not set(m[key]) & set(b[key])
    assert not set(zip(m["env_id"], m["sample_hash"])) & set(zip(b["env_id"], b["sample_hash"]))
    if mode != "trajectory":  # the stricter rules keep out a benchmark (s_t, a_t) in any environment
        assert not set(m["sample_hash"]) & set(b["sample_hash"])


def test_on_replayed_bfcl_tasks_the_default_picks_what_task_id_picks(bfcl_layout):
    """bfcl replay: one trajectory per task, so decontaminating at the trajectory grain (the default) removes
    and picks the same steps as by task_id; only the version (whose spec records the rule) differs."""
    bench = build_benchmark(bfcl_layout, seed=6, make_current=False)
    sizes = {"failure": 5, "no_change": 600, "simple": 600, "complex": 200}
    by_task = build_mixture(
        bfcl_layout, sizes, seed=6, decontaminate="task_id", benchmark_version=bench.version, make_current=False
    )
    default = build_mixture(bfcl_layout, sizes, seed=6, benchmark_version=bench.version, make_current=False)
    store = SplitStore(bfcl_layout, "sft_mixture")
    assert (store.dir(default.version) / "sample_ids.txt").read_bytes() == (
        store.dir(by_task.version) / "sample_ids.txt"
    ).read_bytes()
    assert [(d["before"], d["removed_by_key"], d["removed_by_hash"]) for d in default.decontamination] == [
        (d["before"], d["removed_by_key"], d["removed_by_hash"]) for d in by_task.decontamination
    ]
    assert default.version != by_task.version and sum(d["removed_by_key"] for d in default.decontamination) > 0


def test_contaminated_input_fails_the_overlap_check_loudly(bfcl_layout, tmp_path):
    bench = build_benchmark(bfcl_layout, seed=5, on_shortfall="warn")
    poisoned = tmp_path / "poisoned.parquet"
    pd.read_parquet(bench.path).head(7).to_parquet(poisoned)
    result = overlap_suite(str(poisoned), bench.path, "task_id")
    assert not result.success
    failed = {f.expectation: f for f in result.failures}
    assert failed["expect_column_values_to_not_be_in_set"].unexpected == 7
    rows = result.fact().rows
    assert any("step_id=" in r["first_rows"] for r in rows) and any(r["column"] == "task_id" for r in rows)


def test_unknown_benchmark_version_is_a_precise_error(bfcl_layout):
    with pytest.raises(UnknownVersion, match="benchmark version 'bench-nope' does not exist; known: \\['bench-"):
        build_mixture(bfcl_layout, benchmark_version="bench-nope")


def test_empty_step_table_is_a_precise_error(tmp_path):
    with pytest.raises(EmptyStepTable, match="no labeled steps under"):
        stratify(DataLayout.at(tmp_path))


def test_step_table_suite_names_failed_expectations_and_rows(bfcl_layout, tmp_path):
    assert step_table_suite(bfcl_layout).success
    import pyarrow.parquet as pq

    broken = DataLayout.at(tmp_path / "broken")
    shutil.copytree(bfcl_layout.root, broken.root)
    part = broken.step_parts()[0]
    table = pq.read_table(part).to_pylist()
    table[0]["delta_size"] += 1
    table[1]["outcome"] = "exploded"
    pq.write_table(pq.read_table(part).from_pylist(table, schema=pq.read_table(part).schema), part)
    result = step_table_suite(broken)
    kinds = {f.expectation: f for f in result.failures}
    assert kinds["expect_column_pair_values_to_be_equal"].rows[0]["step_id"] == table[0]["step_id"]
    assert kinds["expect_column_values_to_be_in_set"].rows[0]["step_id"] == table[1]["step_id"]
    # validated in small chunks: the same failures, plus duplicates that only exist across chunks
    chunked = step_table_suite(broken, chunk_rows=300)
    assert {f.expectation for f in chunked.failures} == set(kinds) and chunked.rows == result.rows
    shutil.copy(part, part.replace("part-", "part-zz-copy-"))
    dup = {f.expectation: f for f in step_table_suite(broken, chunk_rows=300).failures}
    assert dup["expect_column_values_to_be_unique"].rows[0]["copies"] == 2


def test_a_verdict_is_kept_for_the_same_step_files_and_validated_again_when_they_change(bfcl_layout, tmp_path):
    """The check reads the last verdict when the step files are the ones it validated (a resumed or repeated run
    imports no great-expectations), and validates again when a part is added or replaced."""
    import pyarrow.parquet as pq

    from pipeline.quality import suites

    layout = DataLayout.at(tmp_path / "root")
    shutil.copytree(bfcl_layout.root, layout.root)
    first = suites.kept_verdict(layout)
    assert first.success and first.kept_from is None
    again = suites.kept_verdict(layout)
    assert again.kept_from and (again.rows, again.evaluated, again.failures) == (first.rows, first.evaluated, [])
    part = layout.step_parts()[0]
    rows = pq.read_table(part).to_pylist()
    rows[0]["outcome"] = "exploded"
    new_part = part.replace("part-", "part-zz-")  # a part is written under a new content key, never in place
    pq.write_table(pq.read_table(part).from_pylist(rows, schema=pq.read_table(part).schema), new_part)
    Path(part).unlink()
    changed = suites.kept_verdict(layout)
    assert changed.kept_from is None and not changed.success
    kept = suites.kept_verdict(layout)  # the failing verdict is kept too, with the rows it names
    assert kept.kept_from and [f.expectation for f in kept.failures] == [f.expectation for f in changed.failures]
    assert kept.failures[0].rows == changed.failures[0].rows


def test_step_table_suite_validates_whole_chunks_not_one_call_per_part(bfcl_layout, monkeypatch):
    """GX costs per validation call: the step-table suite gathers the parts' batches into chunks of
    ``chunk_rows`` rows (a DuckDB relation's reader yields one small batch per part, whatever size is asked)."""
    from pipeline.quality import suites

    calls = []
    real = suites.run_suite
    monkeypatch.setattr(suites, "run_suite", lambda name, df, *a, **k: calls.append(len(df)) or real(name, df, *a, **k))
    result = suites.step_table_suite(bfcl_layout, chunk_rows=1000)
    assert len(bfcl_layout.step_parts()) > 1 and result.rows == sum(calls)
    assert len(calls) <= -(-result.rows // 1000), f"{len(calls)} validation calls for {result.rows} rows: {calls}"
    assert all(n >= 1000 for n in calls[:-1])


def test_assets_checks_schedule_and_sensor(bfcl_layout, tmp_path):
    from assets.automation import splits_on_new_steps, weekly_splits
    from assets.selection import benchmark_split, sft_mixture, step_strata
    from resources import CompositionResource, DataStoreResource, RunPolicyResource
    from resources.storage import DataStoreDuckDBResource

    layout = DataLayout.at(tmp_path / "data")
    shutil.copytree(bfcl_layout.root, layout.root)
    shutil.rmtree(layout.root / "splits", ignore_errors=True)
    sizes = {"failure": 5, "no_change": 100, "simple": 100, "complex": 20}
    resources = {
        "store": DataStoreResource(data_root=str(layout.root)),
        "duckdb": DataStoreDuckDBResource(store=DataStoreResource(data_root=str(layout.root))),
        "composition": CompositionResource(mixture_sizes=sizes),
        "run_policy": RunPolicyResource(),
    }
    run_config = {"ops": {"benchmark_split": {"config": {"on_shortfall": "warn", "seed": 4}}}}
    result = materialize([step_strata, benchmark_split, sft_mixture], resources=resources, run_config=run_config)
    assert result.success
    checks = {e.check_name: e for e in result.get_asset_check_evaluations()}
    # the benchmark is 4 strata short (on_shortfall: warn): the check says so, as a warning, naming them
    assert not checks["composition_matches"].passed and checks["composition_matches"].severity.value == "WARN"
    assert "medium_4" in checks["composition_matches"].description
    assert checks["no_benchmark_overlap"].passed
    meta = {
        e.asset_key.to_user_string(): e.event_specific_data.materialization.metadata
        for e in result.get_asset_materialization_events()
    }
    assert meta["benchmark_split"]["shortfalls"].value == 4
    assert "medium_4" in meta["benchmark_split"]["shortfall_detail"].value
    # a plain client outside the data root: the views' paths are relative to it (docs/sql.md)
    con = duckdb.connect(str(layout.duckdb), read_only=True, config={"file_search_path": str(layout.root)})
    assert con.execute("SELECT count(*) FROM steps").fetchone()[0] == 4625
    mixture_samples = meta["sft_mixture"]["samples"].value
    assert checks["mixture_composition"].passed == (meta["sft_mixture"]["shortfalls"].value == 0)
    assert 200 <= mixture_samples <= 225  # failures may all sit in benchmark tasks (decontaminated away)
    assert con.execute("SELECT count(*) FROM split_members WHERE kind = 'sft_mixture'").fetchone()[0] == mixture_samples
    con.close()

    ctx = build_schedule_context(scheduled_execution_time=pd.Timestamp("2026-11-23T04:00:00Z").to_pydatetime())
    request = weekly_splits("0 4 * * 1")(ctx)
    assert request.run_config["ops"]["benchmark_split"]["config"]["seed"] == 202648

    instance = DagsterInstance.ephemeral()
    from dagster import AssetMaterialization

    instance.report_runless_asset_event(AssetMaterialization("labeled_steps"))
    sensor_ctx = build_sensor_context(instance=instance, resources={"store": resources["store"]})
    tick = splits_on_new_steps.evaluate_tick(sensor_ctx)
    assert not tick.run_requests and "labeled steps unchanged" in tick.skip_message  # the splits were drawn from them
    bench = SplitStore(layout, BENCHMARK)
    manifest = bench.manifest(bench.current())
    bench.write_manifest(bench.current(), {**manifest, "spec": {**manifest["spec"], "input": "older-steps"}})
    requests = splits_on_new_steps.evaluate_tick(
        build_sensor_context(instance=instance, resources={"store": resources["store"]})
    ).run_requests
    assert len(requests) == 1 and requests[0].job_name in (None, "regenerate_splits")
    assert requests[0].run_config["ops"]["benchmark_split"]["config"]["seed"] == 4  # the seed of the store's split


def test_candidate_window_widens_until_picking_equals_picking_from_everything():
    """_pick_cell fetches only the best-ranked candidates per environment; when duplicates of one
    (s_t, a_t) exhaust an environment's window, it widens it — the picks equal pick_diverse over all rows."""
    from collections import Counter

    from pipeline.select.greedy import pick_diverse
    from pipeline.select.selection import _pick_cell

    con = duckdb.connect()
    rows = [(f"a{i:03d}", "envA", "dup" if i < 120 else f"ha{i}", f"r{i:03d}") for i in range(200)]
    rows += [(f"b{i:03d}", "envB", f"hb{i}", f"s{i:03d}") for i in range(10)]
    # the pool now has a tool column (windows are per (env, tool) pair); one tool per env picks as before
    con.execute(
        "CREATE TEMP TABLE pool(step_id VARCHAR, env_id VARCHAR, sample_hash VARCHAR, rank VARCHAR, x INTEGER, "
        "tool VARCHAR)"
    )
    con.executemany("INSERT INTO pool VALUES (?, ?, ?, ?, 1, 't')", rows)
    usage, taken = Counter(), set()
    got = [(s, e) for s, e, _ in _pick_cell(con, "x = 1", 40, 2, usage, taken)]
    expected = pick_diverse([(e, r, s, h) for s, e, h, r in rows], 40, Counter(), set())
    assert got == expected and len(got) == 40
    assert sum(1 for _, env in got if env == "envA") == 30  # the window (2 * 20 + 16) had to widen past 120 duplicates


def test_a_custom_composition_reaches_coverage_metadata_and_summary(bfcl_layout, tmp_path, capsys):
    from assets.selection import step_strata
    from cli.summary import summary
    from pipeline.select.selection import composition_in_force
    from pipeline.store import queries
    from resources import CompositionResource, DataStoreResource, RunPolicyResource
    from resources.composition import CellConfig
    from resources.storage import DataStoreDuckDBResource

    layout = DataLayout.at(tmp_path / "data")
    shutil.copytree(bfcl_layout.root, layout.root)
    shutil.rmtree(layout.root / "splits", ignore_errors=True)
    cells = [
        {"name": "reads", "group": "no_change", "quota": 7, "outcome": "success", "delta_min": 0, "delta_max": 0},
        {"name": "writes", "group": "simple", "quota": 5, "outcome": "success", "delta_min": 1, "delta_max": 12},
    ]
    result = materialize(
        [step_strata],
        resources={
            "store": DataStoreResource(data_root=str(layout.root)),
            "duckdb": DataStoreDuckDBResource(store=DataStoreResource(data_root=str(layout.root))),
            "composition": CompositionResource(cells=[CellConfig(**c) for c in cells], mixture_sizes={"simple": 9}),
            "run_policy": RunPolicyResource(),
        },
    )
    meta = result.get_asset_materialization_events()[0].event_specific_data.materialization.metadata
    candidates = {r.data["cell"]: r.data for r in meta["benchmark_cell_candidates"].records}
    assert (
        set(candidates) == {"reads", "writes"}
        and candidates["reads"]["quota"] == 7
        and candidates["writes"]["quota"] == 5
    )
    groups = {r.data["group"]: r.data for r in meta["balance2_candidates"].records}
    assert set(groups) == {"simple"} and groups["simple"]["wanted"] == 9

    comp = Composition(tuple(Cell(**c) for c in cells), {"simple": 9})
    table = queries.cell_coverage(layout, comp).set_index("cell")
    steps = duckdb.sql(
        f"SELECT count(*) FILTER (outcome = 'success' AND delta_size = 0), "
        f"count(*) FILTER (outcome = 'success' AND delta_size BETWEEN 1 AND 12) "
        f"FROM read_parquet('{layout.steps_glob()}')"
    ).fetchall()[0]
    assert (table.loc["reads", "candidates"], table.loc["writes", "candidates"]) == steps

    assert composition_in_force(layout) == Composition()  # no current split: the profile's
    build_benchmark(layout, comp.cells, seed=0, on_shortfall="warn")
    build_mixture(layout, {"simple": 9}, seed=0)
    assert composition_in_force(layout) == comp
    summary(layout)
    out = capsys.readouterr().out
    assert "candidates for the 12-sample composition" in out
    assert re.search(r"\|\s*reads\s*\|\s*7\s*\|", out) and "medium_3" not in out


def test_a_draw_without_a_seed_keeps_the_seed_of_the_current_split(default_layout, tmp_path):
    """A plain ``./forge run`` (no seed) after the weekly schedule drew the splits at seed 202648: each split is
    drawn at its CURRENT version's seed, so on the same steps it is that version again and CURRENT stays; a named
    seed moves CURRENT; with no CURRENT version the seed is 0 (README "Two commands")."""
    from assets.selection import BenchmarkConfig, MixtureConfig

    assert BenchmarkConfig().seed is None and MixtureConfig().seed is None  # unset in a run config: the CURRENT's
    layout = stratified_copy(default_layout, tmp_path / "data")
    bench, mixture = SplitStore(layout, BENCHMARK), SplitStore(layout, "sft_mixture")
    sizes = {"failure": 5, "no_change": 50, "simple": 50, "complex": 20}
    first = build_benchmark(layout, seed=None)
    assert first.spec["seed"] == 0 and bench.current() == first.version
    weekly = build_benchmark(layout, seed=202648)
    weekly_mixture = build_mixture(layout, sizes, seed=202648)
    assert bench.current() == weekly.version != first.version
    plain = build_benchmark(layout, seed=None, dagster_run_id="a-plain-run")
    plain_mixture = build_mixture(layout, sizes, seed=None, dagster_run_id="a-plain-run")
    assert (plain.version, plain.spec["seed"]) == (weekly.version, 202648)
    assert (plain_mixture.version, plain_mixture.spec["seed"]) == (weekly_mixture.version, 202648)
    assert bench.current() == weekly.version and mixture.current() == weekly_mixture.version
    assert bench.changes_by("a-plain-run") is None and mixture.changes_by("a-plain-run") is None
    named = build_benchmark(layout, seed=0, dagster_run_id="a-seeded-run")
    assert named.version == first.version and bench.changes_by("a-seeded-run") == (weekly.version, first.version)


def test_a_composition_verdict_is_kept_for_the_same_strata_and_validated_again_when_they_change(tmp_path):
    """composition_matches / mixture_composition read the last verdict for the same strata table, and validate
    again (here: failing, naming the stratum) when a count changes."""
    from pipeline.quality import suites

    verdict = tmp_path / "quality" / "composition_matches_verdict.json"
    strata = [{"stratum": "failure", "requested": 5, "available": 9, "selected": 5}]
    first = suites.composition_suite(strata, verdict)
    assert first.success and first.kept_from is None
    assert suites.composition_suite(strata, verdict).kept_from
    short = [{**strata[0], "selected": 4}]
    changed = suites.composition_suite(short, verdict)
    assert changed.kept_from is None and not changed.success and changed.failures[0].rows[0]["stratum"] == "failure"
    kept = suites.composition_suite(short, verdict)
    assert kept.kept_from and kept.failures == changed.failures


def test_verdict_inputs_name_the_split_version_of_a_samples_file(tmp_path):
    """Two split versions' samples files share their name: a verdict keyed by them tells the versions apart."""
    from pipeline.quality.suites import _sized

    for version in ("sft-aaa", "sft-bbb"):
        (tmp_path / version).mkdir()
        (tmp_path / version / "samples.parquet").write_bytes(b"same size")
    one, two = (_sized([str(tmp_path / v / "samples.parquet")]) for v in ("sft-aaa", "sft-bbb"))
    assert one != two and one[0][1] == two[0][1]


def test_great_expectations_loads_without_scipy_stats_until_something_uses_it():
    """The suites load GX with ``scipy.stats`` deferred (none of them uses a distribution expectation; the suites
    above validate through the same loader): a fresh interpreter that loaded GX has not imported it, and
    ``scipy.stats`` still works when used."""
    probe = (
        "import sys\n"
        "from pipeline.quality.suites import _great_expectations\n"
        "gx = _great_expectations()\n"
        "loaded = [m for m in sys.modules if m.startswith('scipy.stats.')]\n"
        "from scipy import stats\n"
        "print(gx.expectations.ExpectColumnValuesToNotBeNull.__name__, len(loaded), stats.norm.cdf(0.0))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["ExpectColumnValuesToNotBeNull", "0", "0.5"], out.stdout
