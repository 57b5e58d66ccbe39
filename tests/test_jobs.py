"""Jobs: launchers (local, real single-node Slurm), Dagster Pipes reporting, LLaMA-Factory configs."""

import shutil
import tempfile
import threading
import time
from pathlib import Path

import duckdb
import pytest
import yaml
from dagster import materialize
from dagster_duckdb import DuckDBResource

from pipeline.jobs.launchers import JobFailed, JobSpec, LocalLauncher, SlurmLauncher
from pipeline.jobs.llamafactory import KNOWN_KEYS, TrainSettings, sft_config
from pipeline.select.selection import build_benchmark, build_mixture
from pipeline.select.stratify import stratify
from pipeline.export.hf_layout import export_split
from pipeline.store.layout import DataLayout
from tests.slurm_cluster import SlurmCluster


@pytest.fixture(scope="module")
def split_layout(default_layout, tmp_path_factory):
    layout = DataLayout.at(tmp_path_factory.mktemp("jobs") / "data")
    shutil.copytree(default_layout.root, layout.root)
    stratify(layout)
    build_benchmark(layout, seed=0, on_shortfall="warn")
    build_mixture(layout, {"failure": 5, "no_change": 50, "simple": 50, "complex": 20}, seed=0)
    export_split(layout, "sft_mixture", None, layout.root / "export" / "sft_mixture")
    return layout


def test_llamafactory_configs():
    full = sft_config(TrainSettings(), Path("/data/export/sft"), Path("/ckpt"))
    assert full["model_name_or_path"] == "Qwen/Qwen3-4B-Base" and full["finetuning_type"] == "full"
    assert full["dataset"] == "envsim_chat" and full["stage"] == "sft" and "lora_rank" not in full
    lora = sft_config(TrainSettings(finetuning_type="lora", lora_rank=8), Path("/d"), Path("/c"))
    assert lora["lora_rank"] == 8 and lora["lora_target"] == "all"
    assert set(full) | set(lora) <= KNOWN_KEYS
    with pytest.raises(ValueError, match="full' or 'lora"):
        sft_config(TrainSettings(finetuning_type="qlora-ish"), Path("/d"), Path("/c"))


def test_local_launcher_success_failure_timeout(tmp_path):
    lines = []
    result = LocalLauncher(poll_s=0.05).run(JobSpec("ok", "echo one; echo two\n", tmp_path), lines.append)
    assert result.state == "COMPLETED" and lines == ["one", "two"]
    with pytest.raises(JobFailed, match="failed with exit code 3") as err:
        LocalLauncher(poll_s=0.05).run(JobSpec("bad", "echo boom; exit 3\n", tmp_path))
    assert "boom" in err.value.log_tail
    with pytest.raises(JobFailed, match="exceeded its time limit"):
        LocalLauncher(poll_s=0.05).run(JobSpec("slow", "sleep 30\n", tmp_path), timeout_s=1)


def _job_resources(layout, launcher):
    from resources import DataStoreResource

    return {"store": DataStoreResource(data_root=str(layout.root)), "launcher": launcher,
            "duckdb": DuckDBResource(database=str(layout.root / "jobs.duckdb"))}


def test_eval_job_reports_through_pipes_and_lands_in_duckdb(split_layout):
    from assets.jobs import simulator_eval_job
    from resources import JobLauncherResource

    launcher = JobLauncherResource(backend="local", workdir=str(split_layout.root / "jobs"))
    result = materialize([simulator_eval_job], resources=_job_resources(split_layout, launcher))
    assert result.success
    meta = result.get_asset_materialization_events()[0].event_specific_data.materialization.metadata
    assert "oracle@" in meta["summary"].value and "no-change" in meta["cm_by_group_from_job"].value
    con = duckdb.connect(str(split_layout.root / "jobs.duckdb"), read_only=True)
    assert dict(con.execute("SELECT simulator, cm FROM eval_runs").fetchall())["oracle"] == 100.0


def test_training_job_fails_clearly_without_llamafactory(split_layout):
    from assets.jobs import sft_training
    from resources import JobLauncherResource

    if shutil.which("llamafactory-cli"):
        pytest.skip("LLaMA-Factory is installed here")
    launcher = JobLauncherResource(backend="local", workdir=str(split_layout.root / "jobs"))
    result = materialize([sft_training], resources=_job_resources(split_layout, launcher), raise_on_error=False)
    assert not result.success
    failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    error = failure.event_specific_data.error
    assert "llamafactory-cli not found" in (error.cause.message if error.cause else error.message)
    cfg = yaml.safe_load(next((split_layout.root / "checkpoints").glob("*.yaml")).read_text())
    assert cfg["dataset_dir"].endswith("export/sft_mixture") and set(cfg) <= KNOWN_KEYS


# --- a real single-node Slurm ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def slurm():
    cluster = SlurmCluster(Path(tempfile.mkdtemp(prefix="envsim-slurm-", dir="/tmp")))
    try:
        yield cluster.start()
    finally:
        cluster.stop()
        assert cluster.daemons_left() == [], cluster.daemons_left()
        shutil.rmtree(cluster.root, ignore_errors=True)


def _slurm_launcher(cluster, **kw):
    return SlurmLauncher(jobcomp=cluster.jobcomp, env=cluster.env, poll_s=0.3, **kw)


@pytest.mark.slow
def test_slurm_eval_job_end_to_end(slurm, split_layout):
    from assets.jobs import simulator_eval_job
    from resources import JobLauncherResource

    launcher = JobLauncherResource(backend="slurm", slurm_conf=str(slurm.conf), jobcomp=str(slurm.jobcomp),
                                   workdir=str(split_layout.root / "slurm-jobs"), cpus=1)
    result = materialize([simulator_eval_job], resources=_job_resources(split_layout, launcher),
                         run_config={"ops": {"simulator_eval_job": {"config": {"simulators": [{"name": "no_change_slurm", "kind": "no_change"}]}}}})
    assert result.success
    con = duckdb.connect(str(split_layout.root / "jobs.duckdb"), read_only=True)
    runs = dict(con.execute("SELECT simulator, samples FROM eval_runs").fetchall())
    assert runs["no_change_slurm"] > 0


@pytest.mark.slow
def test_slurm_failures_are_reported_with_the_schedulers_reason(slurm, tmp_path):
    with pytest.raises(JobFailed, match=r"ended FAILED with exit code 3 \(NonZeroExitCode\)") as err:
        _slurm_launcher(slurm).run(JobSpec("exit3", "echo about to fail; exit 3\n", tmp_path))
    assert "about to fail" in err.value.log_tail
    with pytest.raises(JobFailed, match="sbatch rejected job gpu: .*Invalid generic resource"):
        _slurm_launcher(slurm).run(JobSpec("gpu", "true\n", tmp_path, gpus=1))
    with pytest.raises(JobFailed, match="stayed PENDING .*Partition"):
        _slurm_launcher(slurm, pending_timeout_s=3).run(JobSpec("stuck", "true\n", tmp_path, partition="closed"))
    launcher = _slurm_launcher(slurm)
    threading.Timer(4, launcher.cancel).start()
    with pytest.raises(JobFailed, match="ended CANCELLED"):
        launcher.run(JobSpec("cancelled", "sleep 120\n", tmp_path))


@pytest.mark.slow
def test_slurm_time_limit(slurm, tmp_path):
    start = time.monotonic()
    with pytest.raises(JobFailed, match="ended TIMEOUT"):
        _slurm_launcher(slurm).run(JobSpec("tl", "sleep 300\n", tmp_path, time_limit_min=1))
    assert time.monotonic() - start < 200
