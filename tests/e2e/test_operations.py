"""Operations: names that become paths are validated, empty selections say why, temporary
directories are removed."""

import json
import os
import tempfile
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pipeline.collect.collector import collect
from pipeline.core.strata import Cell
from pipeline.envs.bfcl_replay import ground_truth_trajectories
from pipeline.envs.bfcl_tasks import iter_tasks
from pipeline.execution.child import Limits
from pipeline.execution.sandbox import Sandbox
from pipeline.export.hf_layout import export_split
from pipeline.export.verify import verify_roundtrip
from pipeline.labeling.steps import label
from pipeline.rollouts.store import run_dir
from pipeline.select.selection import build_benchmark, build_mixture
from pipeline.select.stratify import stratify
from pipeline.store.layout import DataLayout, UnsafeName, safe_name
from pipeline.store.versions import BENCHMARK, MIXTURE, EmptySelection, SplitStore
from pipeline.training.launchers import JobSpec
from tests.conftest import TWITTER_CFG, make_task_file

ESCAPES = ["../../../../tmp/x", "..", ".", "a/b", "a\\b", "", ".hidden", "x\x00y", "tab\tname", "x" * 129]


# -- names that become path components ---------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["oracle", "no_change", "my-model", "Qwen_Qwen3-8B", "bench-3f2a9c01d4e5", "envscaler-0", "v1.2+local", "a@b,c=d"],
)
def test_safe_names_pass_unchanged(name):
    assert safe_name(name, "simulator name") == name


@pytest.mark.parametrize("name", ESCAPES + [5, None])
def test_unsafe_names_are_refused_with_what_and_why(name):
    with pytest.raises(UnsafeName, match=r"^simulator name .* cannot be used as a file or directory name: it "):
        safe_name(name, "simulator name")


def test_every_path_built_from_a_name_is_checked(tmp_path):
    layout = DataLayout.at(tmp_path / "data")
    bad = "../../../../tmp/x"
    with pytest.raises(UnsafeName, match="simulator name '../../../../tmp/x'"):
        layout.eval_results("bench-0123", bad)
    with pytest.raises(UnsafeName, match="split version '../../../../tmp/x'"):
        layout.eval_results(bad, "oracle")
    with pytest.raises(UnsafeName, match="benchmark version '../../../../tmp/x'"):
        SplitStore(layout, BENCHMARK).samples(bad)
    with pytest.raises(UnsafeName, match="sft_mixture version '..'"):
        SplitStore(layout, MIXTURE).dir("..")
    with pytest.raises(UnsafeName, match="partition key"):
        layout.for_partition("../elsewhere")
    with pytest.raises(UnsafeName, match="job name"):
        JobSpec(name="../../escape", script="true", workdir=tmp_path)
    with pytest.raises(UnsafeName, match="rollout run id"):
        run_dir(layout, "..")
    assert layout.eval_results("bench-0123", "oracle") == layout.root / "eval" / "bench-0123" / "oracle.jsonl"
    assert layout.for_partition("bfcl-0").partition == "bfcl-0"
    assert run_dir(layout, "sim/model").name == "sim_model"
    assert not any(tmp_path.parent.glob("x")) and sorted(p.name for p in tmp_path.iterdir()) == []


def test_current_pointer_naming_a_path_is_refused(tmp_path):
    """A CURRENT file edited to point outside the split store is an error, not a path."""
    layout = DataLayout.at(tmp_path / "data")
    store = SplitStore(layout, BENCHMARK)
    store.root.mkdir(parents=True)
    (store.root / "CURRENT").write_text("../../../../etc\n")
    with pytest.raises((UnsafeName, KeyError)) as err:
        store.samples(store.resolve(None))
    assert "../../../../etc" in str(err.value)


# -- empty selections --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_layout(tmp_path_factory):
    """Two bfcl tasks collected, labeled and stratified: a handful of steps, all of one environment each."""
    tmp = tmp_path_factory.mktemp("ops")
    truth = {
        "tw": [["post_tweet(content='hello', tags=['#a'])"], ["post_tweet(content='again')"]],
        "math": [["add(a=1, b=2)", "mean(numbers=[1, 2, 3])"]],
    }
    tasks = [
        {
            "id": "tw",
            "question": [[{"role": "user", "content": "post"}], [{"role": "user", "content": "again"}]],
            "initial_config": TWITTER_CFG,
            "involved_classes": ["TwitterAPI"],
            "excluded_function": [],
        },
        {
            "id": "math",
            "question": [[{"role": "user", "content": "add"}]],
            "initial_config": {},
            "involved_classes": ["MathAPI"],
            "excluded_function": [],
        },
    ]
    spec = make_task_file(tmp, tasks, [{"id": k, "ground_truth": v} for k, v in truth.items()])
    layout = DataLayout.at(tmp / "data")
    with Sandbox(workers=1, limits=Limits(call_timeout_s=10)) as box:
        collect(ground_truth_trajectories(iter_tasks([spec])), layout, box)
        label(layout, box)
    stratify(layout)
    return layout


def test_a_mixture_that_decontamination_leaves_empty_says_why(small_layout):
    bench = build_benchmark(
        small_layout, [Cell("everything", "all", 100, "success", 0, 50)], seed=0, on_shortfall="warn"
    )
    assert bench.samples > 0
    with pytest.raises(EmptySelection) as err:
        build_mixture(small_layout, seed=0, decontaminate="env_id", benchmark_version=bench.version)
    message = str(err.value)
    assert message.startswith("sft_mixture sft-") and "selects no sample" in message
    assert f"decontamination against benchmark {bench.version} (by env_id" in message
    assert f"leaves none of the {bench.samples} usable steps" in message or "leaves none of the" in message
    assert "failure 1000 (0 candidates)" in message  # what was asked, and what was left
    assert SplitStore(small_layout, MIXTURE).versions() == []  # no empty version written


def test_a_selection_without_candidates_says_so(small_layout):
    with pytest.raises(
        EmptySelection,
        match=r"benchmark bench-\w+ selects no sample: no usable step matches any stratum; "
        r"asked for failures 5 \(0 candidates\)",
    ):
        build_benchmark(
            small_layout,
            [Cell("failures", "failure", 5, "failure", 3, 9)],
            seed=0,
            on_shortfall="warn",
            make_current=False,
        )


def test_exporting_an_empty_version_is_a_clear_error(small_layout, tmp_path):
    """A version with no samples (written by an earlier release) is refused before Arrow sees it."""
    store = SplitStore(small_layout, MIXTURE)
    bench = SplitStore(small_layout, BENCHMARK)
    version = "sft-000000000000"
    store.dir(version).mkdir(parents=True)
    table = pq.read_table(bench.samples(bench.resolve(None)))
    pq.write_table(table.slice(0, 0), store.samples(version))
    store.write_manifest(
        version, {"version": version, "kind": MIXTURE, "spec": {"decontaminate": "env_id"}, "samples": 0}
    )
    with pytest.raises(
        EmptySelection, match=f"sft_mixture version {version} holds no samples, so there is nothing to export"
    ):
        export_split(small_layout, MIXTURE, version, tmp_path / "export")
    assert not (tmp_path / "export").exists()


# -- temporary directories ---------------------------------------------------------------------------


def test_sandbox_runs_and_exports_leave_no_temporary_directory(small_layout, tmp_path, monkeypatch):
    """Every temporary directory made while running environments, exporting and verifying the export is
    removed again (the sandbox's private /tmp included)."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    before_tmp = {p.name for p in Path("/tmp").glob("envsim-*")}
    layout = DataLayout.at(tmp_path / "data")
    spec = make_task_file(
        tmp_path,
        [
            {
                "id": "m",
                "question": [[{"role": "user", "content": "add"}]],
                "initial_config": {},
                "involved_classes": ["MathAPI"],
                "excluded_function": [],
            }
        ],
        [{"id": "m", "ground_truth": [["add(a=1, b=2)"]]}],
    )
    with Sandbox(workers=2, limits=Limits(call_timeout_s=10)) as box:
        collect(ground_truth_trajectories(iter_tasks([spec])), layout, box)
        label(layout, box)
    report = export_split(small_layout, BENCHMARK, None, tmp_path / "export")
    assert (
        verify_roundtrip(report.directory, SplitStore(small_layout, BENCHMARK).samples(report.version), report.split)
        == []
    )
    assert sorted(os.listdir(scratch)) == []
    assert {p.name for p in Path("/tmp").glob("envsim-*")} - before_tmp <= {"envsim-duckdb"}
    assert json.loads((report.directory / ".envsim-export.json").read_text())["version"] == report.version


# -- a killed run never blocks later runs ------------------------------------------------------------


@pytest.mark.slow
def test_a_run_killed_inside_a_duckdb_step_does_not_block_the_next_run(tmp_path):
    """The real ``dagster dev`` (webserver + daemon) with the project's dagster.yaml: a run holding the
    ``duckdb`` pool slot has its process SIGKILLed; the next run needing the slot completes."""
    import signal
    import time

    from tests.support.ui_server import ROOT, DagsterServer

    workspace = tmp_path / "workspace.yaml"
    workspace.write_text(
        f"load_from:\n  - python_file:\n      relative_path: {ROOT / 'tests' / 'support' / 'pool_defs.py'}\n"
        f"      working_directory: {ROOT}\n"
    )
    instance_yaml = (ROOT / "dagster.yaml").read_text() + "nux:\n  enabled: false\n"
    srv = DagsterServer(
        tmp_path / "home", tmp_path / "data", tmp_path / "dagster.log", workspace=workspace, instance_yaml=instance_yaml
    )
    marker = tmp_path / "data" / "hold_slot.pid"
    try:
        srv.start()
        first = srv.launch("__ASSET_JOB", ["hold_slot"])
        deadline = time.monotonic() + 120
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert marker.exists(), srv.log_tail()
        os.kill(int(marker.read_text()), signal.SIGKILL)  # the run worker, inside the step holding the slot
        second = srv.launch("__ASSET_JOB", ["after_kill"])
        assert srv.wait_run(first, timeout=120) == "FAILURE", srv.log_tail()
        assert srv.wait_run(second, timeout=180) == "SUCCESS", srv.log_tail()
    finally:
        srv.stop()
