"""The α-curriculum mixture from (synthetic) evaluation results in DuckDB."""

import duckdb
import pandas as pd
import pytest

from pipeline.curriculum.mixture import CURRICULUM, CurriculumSpec, NoEvaluation, allocate, build_curriculum, record, resolve_run, weight
from pipeline.labeling.steps import label
from pipeline.select.selection import build_benchmark
from pipeline.select.stratify import stratify
from pipeline.store.versions import SplitStore
from pipeline.core.strata import Cell
from tests.layouts import collected_builtin

RUN = "sim@bench"
RATES = {"failure": 0.95, "simple": 0.50, "medium": 0.05}  # strata A, B, C


@pytest.fixture(scope="module")
def layout(tmp_path_factory, sandbox):
    layout = collected_builtin(tmp_path_factory.mktemp("curriculum") / "data", sandbox, scenarios_per_env=3, call_budget=1500,
                               batch_episodes=40)
    label(layout, sandbox)
    stratify(layout)
    cells = [Cell("failure", "failure", 5, "failure", 0, 0), Cell("simple", "simple", 5, "success", 1, 2),
             Cell("medium", "medium", 5, "success", 3, 6)]
    build_benchmark(layout, cells, seed=0, on_shortfall="warn")
    return layout


@pytest.fixture()
def eval_con(layout):
    """Synthetic evaluation results: 100 samples each of failure (95% CM), simple (50%), medium (5%)."""
    version = SplitStore(layout, "benchmark").current()
    rows = []
    for grp, rate in RATES.items():
        for i in range(100):
            outcome, delta = ("failure", 0) if grp == "failure" else ("success", 1 + i % 2 if grp == "simple" else 3 + i % 4)
            rows.append({"run_id": RUN, "simulator": "sim", "split_version": version, "step_id": f"{grp}-{i}", "env_id": f"e{i % 3}",
                         "outcome": outcome, "delta_size": delta, "fm": True, "cm": i < rate * 100, "cm_changed_paths": True,
                         "request_error": None, "seq": i})
    con = duckdb.connect()
    df = pd.DataFrame(rows)  # noqa: F841 (read by DuckDB)
    con.execute("CREATE TABLE eval_results AS SELECT * FROM df")
    return con


def test_weight_and_allocation():
    assert weight(0.5, 0.5, 0.1) == weight(0.6, 0.5, 0.1) == 1.0
    assert weight(0.95, 0.5, 0.1) < 0.01 and weight(0.05, 0.5, 0.1) < 0.01
    assert allocate({"a": 1.0, "b": 1.0, "c": 0.0}, {"a": 3, "b": 100, "c": 100}, 10) == {"a": 3, "b": 7, "c": 0}
    assert sum(allocate({"a": 1.0, "b": 2.0}, {"a": 100, "b": 100}, 10).values()) == 10


def test_most_weight_on_the_frontier_stratum_deterministic_and_decontaminated(layout, eval_con):
    spec = CurriculumSpec(run_id=resolve_run(eval_con, "sim", None), size=60, levels=("stratum",))
    first = build_curriculum(layout, eval_con, spec)
    groups = {g["group"]: g for g in first.groups}
    assert groups["simple"]["estimate"] == pytest.approx((50 + 4 * 0.5) / 104, abs=1e-3)
    assert groups["no-change"]["weight"] == 0 and groups["no-change"]["estimate"] is None  # not evaluated
    assert groups["simple"]["weight"] == 1.0 and groups["failure"]["weight"] < 0.01 and groups["medium"]["weight"] < 0.01
    quotas = {g: groups[g]["quota"] for g in groups}
    assert quotas["simple"] >= 0.9 * sum(quotas.values()) and first.selection.samples == 60
    samples = pd.read_parquet(first.selection.path)
    bench = pd.read_parquet(SplitStore(layout, "benchmark").samples(first.selection.spec["benchmark"]))
    assert not set(samples.sample_hash) & set(bench.sample_hash)
    assert not set(samples.task_id) & set(bench.task_id)
    assert (samples.stratum == "simple").mean() >= 0.9

    again = build_curriculum(layout, eval_con, spec)
    store = SplitStore(layout, CURRICULUM)
    assert again.selection.version == first.selection.version and first.selection.version.startswith("cur-")
    assert (store.dir(first.selection.version) / "sample_ids.txt").read_bytes() == (store.dir(again.selection.version) / "sample_ids.txt").read_bytes()
    other = build_curriculum(layout, eval_con, CurriculumSpec(run_id=RUN, size=60, levels=("stratum",), seed=1))
    assert other.selection.version != first.selection.version

    con = duckdb.connect()
    assert record(con, layout) == 2
    assert con.execute("SELECT count(*) FROM split_members WHERE kind = 'curriculum' AND version = ?",
                       [first.selection.version]).fetchone()[0] == 60
    top = con.execute("SELECT grp FROM curriculum_groups WHERE version = ? ORDER BY quota DESC LIMIT 1", [first.selection.version]).fetchone()
    assert top == ("simple",)


def test_finer_levels_smooth_toward_the_stratum(layout, eval_con):
    result = build_curriculum(layout, eval_con, CurriculumSpec(run_id=RUN, size=40, levels=("stratum", "delta")), make_current=False)
    simple = [g for g in result.groups if g["stratum"] == "simple"]
    assert {g["delta"] for g in simple} == {"1", "2"} and all(0.4 < g["estimate"] < 0.6 for g in simple)
    unseen = [g for g in result.groups if g["stratum"] == "medium" and g["eval_samples"] == 0]
    assert all(g["estimate"] < 0.15 for g in unseen)  # |Δ| never evaluated: the stratum's estimate


def test_missing_evaluation_is_a_clear_error():
    with pytest.raises(NoEvaluation, match="simulator_eval"):
        resolve_run(duckdb.connect(), None, None)


def test_asset_sensor_and_job_are_registered(layout, eval_con, tmp_path):
    from dagster import materialize
    from dagster_duckdb import DuckDBResource

    from assets.simulation import curriculum_mixture
    from pipeline.definitions import defs
    from resources import DataStoreResource

    db = tmp_path / "envsim.duckdb"
    eval_con.execute(f"ATTACH '{db}' AS file; CREATE TABLE file.eval_results AS SELECT * FROM eval_results; DETACH file")
    result = materialize([curriculum_mixture], resources={"store": DataStoreResource(data_root=str(layout.root)),
                                                          "duckdb": DuckDBResource(database=str(db))},
                         run_config={"ops": {"curriculum_mixture": {"config": {"size": 30, "levels": ["stratum"]}}}})
    assert result.success
    meta = result.get_asset_materialization_events()[0].event_specific_data.materialization.metadata
    assert meta["evaluation_run"].value == RUN and meta["samples"].value == 30 and "| simple    |" in meta["groups"].value
    assert defs.resolve_sensor_def("curriculum_on_new_eval").job_name == "curriculum_refresh"
    main = {k.to_user_string() for k in defs.resolve_job_def("envsim_main").asset_layer.executable_asset_keys}
    assert "curriculum_mixture" not in main and "simulated_rollouts" not in main
    assert {k.to_user_string() for k in defs.resolve_job_def("simulation").asset_layer.executable_asset_keys} == {"simulated_rollouts", "rollout_sft_dataset"}
