"""What ``./forge run`` says after its run (issue 32, item 5), from that run's Dagster event log: on failure
the failed step and its one-line cause last, then a FAILED line naming the step, and nothing from earlier runs
(their splits, HF paths); on success FM / CM / cm_reference per simulator of this run's ``simulator_eval`` and
the moves of CURRENT it made, with the split tables stratum first."""

import time

import pytest
from dagster import AssetExecutionContext, DagsterInstance, Definitions, MaterializeResult, asset, define_asset_job

from cli.entry import main
from cli.launch import run_outcome
from cli.summary import report_evaluation, report_splits
from pipeline.select.selection import ShortfallError
from pipeline.store.layout import DataLayout
from pipeline.store.versions import BENCHMARK, SplitStore
from resources.storage import DataStoreResource

STRATA = [{"stratum": "failure", "requested": 2, "available": 5, "selected": 2, "environments": 2, "missing": 0}]
TOOLS = [{"stratum": "failure", "tool_pairs": 2, "top_tool": "rm (fs)", "top_tool_share": 0.5}]


def _version(store: SplitStore, version: str, seed: int) -> None:
    store.write_manifest(
        version, {"samples": 2, "shortfalls": [], "spec": {"seed": seed}, "strata": STRATA, "tools": TOOLS}
    )


@asset
def step_strata(store: DataStoreResource) -> None:
    store.layout().root.mkdir(parents=True, exist_ok=True)


@asset(deps=[step_strata])
def benchmark_split(context: AssetExecutionContext, store: DataStoreResource) -> None:
    layout = store.layout()
    if (layout.root / "fail").exists():
        raise ShortfallError("benchmark bench-6ec2 cannot be filled: failure: 0 of 20;\nmedium_4: 0 of 50")
    SplitStore(layout, BENCHMARK).set_current("bench-43d6", context.run.run_id)


@asset(deps=[benchmark_split])
def simulator_eval() -> MaterializeResult:
    return MaterializeResult(
        metadata={
            "split_version": "bench-43d6",
            "samples": 400,
            "fm/oracle": 100.0,
            "cm/oracle": 100.0,
            "cm_reference/oracle": 100.0,
            "fm_reference/oracle": 100.0,
            "fm/my-model": 71.5,
            "cm/my-model": 42.25,
            "cm_reference/my-model": 40.0,
        }
    )


def _run(root) -> str:
    defs = Definitions(
        assets=[step_strata, benchmark_split, simulator_eval],
        jobs=[define_asset_job("envsim_main")],
        resources={"store": DataStoreResource(data_root=str(root))},
    )
    with DagsterInstance.get() as instance:
        return defs.resolve_job_def("envsim_main").execute_in_process(instance=instance, raise_on_error=False).run_id


@pytest.fixture
def root(tmp_path, monkeypatch):
    (tmp_path / "home").mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    layout = DataLayout.at(tmp_path / "data")
    store = SplitStore(layout, BENCHMARK)
    _version(store, "bench-43d6", 0)
    _version(store, "bench-6ec2", 1)
    store.set_current("bench-6ec2", "an-earlier-run")  # an earlier run's split: not this run's
    return layout


def test_a_failed_run_ends_with_its_step_and_cause_and_nothing_from_earlier_runs(root, capsys):
    (root.root / "fail").touch()
    since = time.time() - 1
    _run(root.root)
    capsys.readouterr()
    code = main(["report", "--since", str(since), "--data-root", str(root.root), "--status", "1"])
    out, err = capsys.readouterr()
    assert code == 1
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines[-2] == (
        "step benchmark_split failed: ShortfallError: benchmark bench-6ec2 cannot be filled: "
        "failure: 0 of 20; medium_4: 0 of 50"
    )
    assert lines[-1] == "./forge run: FAILED at step benchmark_split (exit 1)"
    assert "Run " in out and "benchmark_split" in out  # this run's timings
    for earlier in ("bench-6ec2", "Data root", "Hugging Face", "current bench", "benchmark:"):
        assert earlier not in out + "\n".join(lines[:-2]), earlier


def test_the_outcome_holds_this_runs_scores(root):
    run_id = _run(root.root)
    with DagsterInstance.get() as instance:
        outcome = run_outcome(instance, run_id)
    assert not outcome.failed and outcome.eval_version == "bench-43d6"
    assert outcome.evaluation == {
        "oracle": {"fm": 100.0, "cm": 100.0, "cm_reference": 100.0, "fm_reference": 100.0},
        "my-model": {"fm": 71.5, "cm": 42.25, "cm_reference": 40.0},
    }


def test_the_summary_names_fm_cm_and_cm_reference_per_simulator(capsys):
    report_evaluation(
        {
            "oracle": {"fm": 100.0, "cm": 100.0, "cm_reference": 100.0},
            "my-model": {"fm": 71.5, "cm": 42.25, "cm_reference": 40.0},
        },
        "bench-43d6",
    )
    out = capsys.readouterr().out
    assert "bench-43d6" in out
    header = next(line for line in out.splitlines() if line.startswith("|"))
    assert [c.strip() for c in header.strip("|").split("|")] == ["simulator", "fm", "cm", "cm_reference"]
    assert any("my-model" in line and "71.5" in line and "42.25" in line and "40" in line for line in out.splitlines())


def test_a_move_of_current_is_announced_and_the_tables_start_with_the_stratum(root, capsys):
    run_id = _run(root.root)  # makes the seed-0 version current again
    report_splits(root, run_id)
    out = capsys.readouterr().out
    assert "benchmark current: bench-6ec2 → bench-43d6" in out
    table = [line for line in out.splitlines() if line.startswith("|")]
    assert table and table[0].split("|")[1].strip() == "stratum"
    report_splits(root, "a-run-that-changed-nothing")
    assert "benchmark current: bench-43d6 (unchanged by this run)" in capsys.readouterr().out
