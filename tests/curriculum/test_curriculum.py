"""The α-curriculum mixture from (synthetic) evaluation results in DuckDB."""

import math

import duckdb
import pandas as pd
import pytest

from pipeline.core.strata import Cell
from pipeline.curriculum.mixture import (
    CURRICULUM,
    CurriculumSpec,
    NoEvaluation,
    allocate,
    build_curriculum,
    describe,
    flat_top_weight,
    genenv_weight,
    record,
    resolve_run,
    weight,
)
from pipeline.labeling.steps import label
from pipeline.select.selection import build_benchmark
from pipeline.select.stratify import stratify
from pipeline.store.versions import SplitStore
from tests.support.layouts import collected_builtin
from tests.support.metadata import text

RUN = "sim@bench"
RATES = {"failure": 0.95, "simple": 0.50, "medium": 0.05}  # strata A, B, C
# their smoothed estimates (prior_strength 4 toward the overall 0.5): failure 97/104, simple 52/104, medium 7/104
GAP = 97 / 104 - 0.5  # |p̂ − α| of failure and of medium = 0.432692
W_EDGE = math.exp(-2.0 * GAP**2)  # their GenEnv weight with β = 2: exp(−0.374445) = 0.687671


@pytest.fixture(scope="module")
def layout(tmp_path_factory, sandbox):
    layout = collected_builtin(
        tmp_path_factory.mktemp("curriculum") / "data",
        sandbox,
        scenarios_per_env=3,
        call_budget=1500,
        batch_episodes=40,
    )
    label(layout, sandbox)
    stratify(layout)
    cells = [
        Cell("failure", "failure", 5, "failure", 0, 0),
        Cell("simple", "simple", 5, "success", 1, 2),
        Cell("medium", "medium", 5, "success", 3, 6),
    ]
    build_benchmark(layout, cells, seed=0, on_shortfall="warn")
    return layout


@pytest.fixture()
def eval_con(layout):
    """Synthetic evaluation results: 100 samples each of failure (95% CM), simple (50%), medium (5%)."""
    version = SplitStore(layout, "benchmark").current()
    rows = []
    for grp, rate in RATES.items():
        for i in range(100):
            outcome, delta = (
                ("failure", 0) if grp == "failure" else ("success", 1 + i % 2 if grp == "simple" else 3 + i % 4)
            )
            rows.append(
                {
                    "run_id": RUN,
                    "simulator": "sim",
                    "split_version": version,
                    "step_id": f"{grp}-{i}",
                    "env_id": f"e{i % 3}",
                    "outcome": outcome,
                    "delta_size": delta,
                    "fm": True,
                    "cm": i < rate * 100,
                    "cm_changed_paths": True,
                    "request_error": None,
                    "seq": i,
                }
            )
    con = duckdb.connect()
    df = pd.DataFrame(rows)  # noqa: F841 (read by DuckDB)
    con.execute("CREATE TABLE eval_results AS SELECT * FROM df")
    return con


def test_default_weight_is_genenv_environment_reward():
    """exp(−β(p̂ − α)²) with α = 0.5, β = 2 (hand-computed); the flat-top default gave exp(−8) = 0.00034 at p̂ = 0."""
    spec = CurriculumSpec(run_id=RUN)
    assert (spec.curve, spec.alpha, spec.beta, spec.filter_k) == ("genenv", 0.5, 2.0, None)
    assert weight(0.0, spec)[0] == pytest.approx(0.606531, abs=1e-6) and weight(1.0, spec)[0] == pytest.approx(
        0.606531, abs=1e-6
    )
    assert weight(0.5, spec) == (1.0, None)
    assert weight(0.25, spec)[0] == pytest.approx(0.882497, abs=1e-6) and weight(0.75, spec)[0] == pytest.approx(
        0.882497, abs=1e-6
    )
    assert weight(0.0, spec)[1] is None  # no difficulty filter by default
    assert weight(0.0, CurriculumSpec(run_id=RUN, beta=8.0))[0] == pytest.approx(0.135335, abs=1e-6)  # exp(−2)
    assert weight(0.2, CurriculumSpec(run_id=RUN, alpha=0.2, beta=8.0)) == (1.0, None)
    assert genenv_weight(0.0) == pytest.approx(math.exp(-0.5)) and genenv_weight(0.0, 0.5, 8.0) == pytest.approx(
        math.exp(-2)
    )
    assert describe(spec) == "genenv: w = exp(−2·(p̂ − 0.5)²)"


def test_difficulty_filter_drops_groups_and_says_why():
    spec = CurriculumSpec(run_id=RUN, filter_k=0.3)
    assert weight(0.0, spec) == (0.0, "|p̂ − α| = 0.5000 > k = 0.3")
    assert weight(0.9, spec) == (0.0, "|p̂ − α| = 0.4000 > k = 0.3")
    assert weight(0.25, spec) == (pytest.approx(0.882497, abs=1e-6), None)  # within k: GenEnv's weight
    assert weight(0.25, CurriculumSpec(run_id=RUN, filter_k=0.25))[1] is None  # |p̂ − α| = k is kept
    assert weight(0.5, CurriculumSpec(run_id=RUN, filter_k=0.0)) == (1.0, None)
    assert weight(0.51, CurriculumSpec(run_id=RUN, filter_k=0.0))[0] == 0.0
    assert (
        weight(0.0, CurriculumSpec(run_id=RUN, curve="flat_top", filter_k=0.3))[1] == "|p̂ − α| = 0.5000 > k = 0.3"
    )  # either curve
    assert describe(spec) == "genenv: w = exp(−2·(p̂ − 0.5)²); groups with |p̂ − 0.5| > 0.3 filtered out"


def test_flat_top_option_keeps_the_old_values():
    spec = CurriculumSpec(run_id=RUN, curve="flat_top")
    assert weight(0.5, spec) == weight(0.6, spec) == weight(0.4, spec) == (1.0, None)
    assert weight(0.0, spec)[0] == pytest.approx(math.exp(-8), rel=1e-9)  # excess 0.4 = 4 bands: 0.000335
    assert weight(0.95, spec)[0] == pytest.approx(math.exp(-6.125), rel=1e-9)  # excess 0.35
    assert weight(0.8, CurriculumSpec(run_id=RUN, curve="flat_top", band=0.2))[0] == pytest.approx(
        math.exp(-0.125), rel=1e-9
    )
    assert flat_top_weight(0.05, 0.5, 0.1) == pytest.approx(math.exp(-6.125), rel=1e-9)
    assert describe(spec) == "flat_top: w = 1 within 0.5 ± 0.1, Gaussian fall-off (scale 0.1) outside"


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"alpha": 1.5}, r"alpha must be in \[0, 1\], got 1.5"),
        ({"alpha": -0.1}, r"alpha must be in \[0, 1\]"),
        ({"alpha": float("nan")}, r"alpha must be in \[0, 1\], got nan"),
        ({"beta": 0.0}, r"beta must be a finite number > 0, got 0.0"),
        ({"beta": -2.0}, r"beta must be a finite number > 0"),
        ({"beta": float("inf")}, r"beta must be a finite number > 0, got inf"),
        ({"filter_k": -0.1}, r"filter_k must be ≥ 0 \(or None for no filter\), got -0.1"),
        ({"curve": "gauss"}, r"curve must be one of \['genenv', 'flat_top'\], not 'gauss'"),
        ({"curve": "flat_top", "band": 0.0}, r"band must be a finite number > 0 with curve 'flat_top', got 0.0"),
    ],
)
def test_settings_are_checked_with_one_line_errors(settings, message):
    with pytest.raises(ValueError, match=message) as raised:
        CurriculumSpec(run_id=RUN, **settings)
    assert "\n" not in str(raised.value)


def test_band_is_not_checked_where_it_is_not_used():
    assert CurriculumSpec(run_id=RUN, band=0.0).band == 0.0  # genenv ignores band


def test_allocation():
    assert allocate({"a": 1.0, "b": 1.0, "c": 0.0}, {"a": 3, "b": 100, "c": 100}, 10) == {"a": 3, "b": 7, "c": 0}
    assert sum(allocate({"a": 1.0, "b": 2.0}, {"a": 100, "b": 100}, 10).values()) == 10


def test_most_weight_on_the_frontier_stratum_deterministic_and_decontaminated(layout, eval_con):
    spec = CurriculumSpec(run_id=resolve_run(eval_con, "sim", None), size=60, levels=("stratum",))
    first = build_curriculum(layout, eval_con, spec)
    groups = {g["group"]: g for g in first.groups}
    assert groups["simple"]["estimate"] == pytest.approx((50 + 4 * 0.5) / 104, abs=1e-3)
    assert groups["no_change"]["weight"] == 0 and groups["no_change"]["estimate"] is None  # not evaluated
    # GenEnv's default weights: the strata at p̂ ≈ 0.93 and ≈ 0.07 keep exp(−2 · 0.4327²) = 0.687671 (flat-top: < 0.01)
    assert groups["simple"]["weight"] == 1.0
    assert groups["failure"]["weight"] == groups["medium"]["weight"] == pytest.approx(W_EDGE, abs=1e-6) == 0.687671
    assert all(g["filtered"] is None for g in first.groups)
    quotas = {g: groups[g]["quota"] for g in groups}
    # 60 · w / Σw = 25.26 (simple), 17.37 (failure), 17.37 (medium); the last sample to failure (tie, by key)
    assert quotas == {"simple": 25, "failure": 18, "medium": 17, "no_change": 0, "difficult": 0} and first.samples == 60
    samples = pd.read_parquet(first.path)
    bench = pd.read_parquet(SplitStore(layout, "benchmark").samples(first.spec["benchmark"]))
    # decontaminated like the mixture (default: no benchmark trajectory, no benchmark (env, s_t, a_t))
    assert first.spec["decontaminate"] == "trajectory"
    assert not set(samples.trajectory_id) & set(bench.trajectory_id)
    assert not set(zip(samples.env_id, samples.sample_hash)) & set(zip(bench.env_id, bench.sample_hash))
    assert samples.stratum.value_counts().to_dict() == {"simple": 25, "failure": 18, "medium": 17}

    again = build_curriculum(layout, eval_con, spec)
    store = SplitStore(layout, CURRICULUM)
    assert again.version == first.version and first.version.startswith("cur-")
    assert (store.dir(first.version) / "sample_ids.txt").read_bytes() == (
        store.dir(again.version) / "sample_ids.txt"
    ).read_bytes()
    other = build_curriculum(layout, eval_con, CurriculumSpec(run_id=RUN, size=60, levels=("stratum",), seed=1))
    assert other.version != first.version

    con = duckdb.connect()
    assert record(con, layout) == 2
    assert (
        con.execute(
            "SELECT count(*) FROM split_members WHERE kind = 'curriculum' AND version = ?", [first.version]
        ).fetchone()[0]
        == 60
    )
    top = con.execute(
        "SELECT grp FROM curriculum_groups WHERE version = ? ORDER BY quota DESC LIMIT 1", [first.version]
    ).fetchone()
    assert top == ("simple",)
    by_task = build_curriculum(
        layout,
        eval_con,
        CurriculumSpec(run_id=RUN, size=60, levels=("stratum",), decontaminate="task_id"),
        make_current=False,
    )  # the stricter option: no step of a benchmark task/scenario
    assert not set(pd.read_parquet(by_task.path).task_id) & set(bench.task_id)


def test_finer_levels_smooth_toward_the_stratum(layout, eval_con):
    result = build_curriculum(
        layout, eval_con, CurriculumSpec(run_id=RUN, size=40, levels=("stratum", "delta")), make_current=False
    )
    simple = [g for g in result.groups if g["stratum"] == "simple"]
    assert {g["delta"] for g in simple} == {"1", "2"} and all(0.4 < g["estimate"] < 0.6 for g in simple)
    unseen = [g for g in result.groups if g["stratum"] == "medium" and g["eval_samples"] == 0]
    assert all(g["estimate"] < 0.15 for g in unseen)  # |Δ| never evaluated: the stratum's estimate


def test_difficulty_filter_and_flat_top_end_to_end(layout, eval_con):
    base = CurriculumSpec(run_id=RUN, size=60, levels=("stratum",))
    default = build_curriculum(layout, eval_con, base, make_current=False)
    filtered = build_curriculum(
        layout, eval_con, CurriculumSpec(run_id=RUN, size=60, levels=("stratum",), filter_k=0.3), make_current=False
    )
    groups = {g["group"]: g for g in filtered.groups}
    for name in ("failure", "medium"):  # |p̂ − α| = 0.4327 > 0.3
        assert (
            groups[name]["weight"] == 0
            and groups[name]["quota"] == 0
            and groups[name]["filtered"] == "|p̂ − α| = 0.4327 > k = 0.3"
        )
    assert (
        groups["simple"]["filtered"] is None and groups["simple"]["weight"] == 1.0 and groups["simple"]["quota"] == 60
    )
    assert groups["no_change"]["filtered"] is None and groups["no_change"]["weight"] == 0  # not evaluated, not filtered
    assert set(pd.read_parquet(filtered.path).stratum) == {"simple"}

    flat = build_curriculum(
        layout, eval_con, CurriculumSpec(run_id=RUN, size=60, levels=("stratum",), curve="flat_top"), make_current=False
    )
    groups = {g["group"]: g for g in flat.groups}  # the old default: excess 0.3327 = 3.3 bands → exp(−5.535)
    assert groups["simple"]["weight"] == 1.0
    assert (
        groups["failure"]["weight"]
        == groups["medium"]["weight"]
        == pytest.approx(math.exp(-0.5 * ((GAP - 0.1) / 0.1) ** 2), abs=1e-6)
    )
    assert groups["failure"]["weight"] < 0.01 and groups["simple"]["quota"] >= 0.9 * 60
    assert (pd.read_parquet(flat.path).stratum == "simple").mean() >= 0.9
    assert len({default.version, filtered.version, flat.version}) == 3  # curve and k are in the id
    assert filtered.spec["curriculum"]["filter_k"] == 0.3 and flat.spec["curriculum"]["curve"] == "flat_top"

    con = duckdb.connect()  # a curriculum_groups table from before `filtered` gets the column
    con.execute("""CREATE TABLE curriculum_groups (version VARCHAR, run_id VARCHAR, grp VARCHAR,
                   estimate DOUBLE, eval_samples INTEGER,
                   eval_successes INTEGER, weight DOUBLE, candidates INTEGER, quota INTEGER, selected INTEGER)""")
    record(con, layout)
    rows = con.execute(
        "SELECT grp, weight, filtered FROM curriculum_groups WHERE version = ? ORDER BY grp",
        [filtered.version],
    ).fetchall()
    assert ("failure", 0.0, "|p̂ − α| = 0.4327 > k = 0.3") in rows and ("simple", 1.0, None) in rows


def test_missing_evaluation_is_a_clear_error():
    with pytest.raises(NoEvaluation, match="simulator_eval"):
        resolve_run(duckdb.connect(), None, None)


def test_asset_sensor_and_job_are_registered(layout, eval_con, tmp_path):
    from dagster import materialize
    from dagster_duckdb import DuckDBResource

    from assets.definitions import build_definitions
    from assets.simulation import curriculum_mixture
    from pipeline.core.settings import Settings
    from resources import DataStoreResource

    db = tmp_path / "envsim.duckdb"
    eval_con.execute(
        f"ATTACH '{db}' AS file; CREATE TABLE file.eval_results AS SELECT * FROM eval_results; DETACH file"
    )
    result = materialize(
        [curriculum_mixture],
        resources={"store": DataStoreResource(data_root=str(layout.root)), "duckdb": DuckDBResource(database=str(db))},
        run_config={"ops": {"curriculum_mixture": {"config": {"size": 30, "levels": ["stratum"], "filter_k": 0.3}}}},
    )
    assert result.success
    meta = result.get_asset_materialization_events()[0].event_specific_data.materialization.metadata
    assert meta["evaluation_run"].value == RUN and meta["samples"].value == 30 and "simple" in text(meta["groups"])
    assert meta["weighting"].value == "genenv: w = exp(−2·(p̂ − 0.5)²); groups with |p̂ − 0.5| > 0.3 filtered out"
    assert "failure" in text(meta["groups"]) and "> k = 0.3" in text(meta["groups"])
    defs = build_definitions(Settings())
    assert defs.resolve_sensor_def("curriculum_on_new_eval").job_name == "curriculum_refresh"
    main = {k.to_user_string() for k in defs.resolve_job_def("envsim_main").asset_layer.executable_asset_keys}
    assert "curriculum_mixture" not in main and "simulated_rollouts" not in main
    assert {k.to_user_string() for k in defs.resolve_job_def("simulation").asset_layer.executable_asset_keys} == {
        "simulated_rollouts",
        "rollout_sft_dataset",
    }
