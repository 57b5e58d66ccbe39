"""Jobs: launchers (local, real single-node Slurm), Dagster Pipes reporting, LLaMA-Factory configs."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import duckdb
import pytest
import yaml
from dagster import AssetExecutionContext, MaterializeResult, asset, materialize
from dagster_duckdb import DuckDBResource

from pipeline.core.processes import running
from pipeline.export.revisions import export_revision
from pipeline.select.selection import build_benchmark, build_mixture
from pipeline.training import checkpoints, steps
from pipeline.training.launchers import JobFailed, JobNeeds, JobSpec, LogFollower, SlurmLauncher, local_job
from pipeline.training.llamafactory import (
    InvalidTrainingArguments,
    TrainSettings,
    base_model_revision,
    check_dataset,
    checkpoint_version,
    launch_env,
    library_versions,
    loss_plot,
    run_report,
    sft_config,
    tracking_env,
    train_needs,
    train_script,
    validate,
    write_config,
)
from tests.support import fake_llamafactory
from tests.support.layouts import stratified_copy
from tests.support.metadata import text
from tests.support.slurm_cluster import SlurmCluster

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def split_layout(default_layout, tmp_path_factory):
    layout = stratified_copy(default_layout, tmp_path_factory.mktemp("jobs") / "data")
    build_benchmark(layout, seed=0, on_shortfall="warn")
    build_mixture(layout, {"failure": 5, "no_change": 50, "simple": 50, "complex": 20}, seed=0)
    # with the published EnvSimBench Alpaca records (dataset envsim_envsimbench_alpaca) next to ours
    export_revision(layout, "sft_mixture", None, envsimbench_format=True)  # export/sft_mixture/<version> + current
    return layout


def test_llamafactory_config_defaults_are_the_published_recipe():
    full = sft_config(TrainSettings(), Path("/data/export/sft"), Path("/ckpt"))
    recipe = {
        "model_name_or_path": "Qwen/Qwen3-4B-Base",
        "finetuning_type": "full",
        "template": "qwen",
        "cutoff_len": 8192,
        "learning_rate": 2e-5,
        "num_train_epochs": 3.0,
        "per_device_train_batch_size": 1,
        "gradient_accumulation_steps": 32,
        "seed": 42,
        "data_seed": 42,
        "report_to": "none",
        "lr_scheduler_type": "cosine",
        "warmup_ratio": 0.05,
        "bf16": True,
        "disable_gradient_checkpointing": False,
        "flash_attn": "fa2",
        "save_steps": 200,
        "save_total_limit": 3,
        "dataset": "envsim_chat",
        "stage": "sft",
        "dataset_dir": "/data/export/sft",
        "output_dir": "/ckpt",
    }
    assert {k: full[k] for k in recipe} == recipe
    assert "lora_rank" not in full and "deepspeed" not in full and launch_env(1) == {}
    lora = sft_config(TrainSettings(finetuning_type="lora", lora_rank=8), Path("/d"), Path("/c"))
    assert lora["lora_rank"] == 8 and lora["lora_target"] == "all"
    multi = sft_config(TrainSettings(), Path("/d"), Path("/c"), gpus=2, deepspeed_path=Path("/c/ds_z3_config.json"))
    assert multi["deepspeed"] == "/c/ds_z3_config.json" and launch_env(2) == {
        "FORCE_TORCHRUN": "1",
        "NPROC_PER_NODE": "2",
        "NNODES": "1",
    }
    assert "save_only_model" not in full, "checkpoints keep the optimizer state: a preempted run resumes from them"
    passed = sft_config(TrainSettings(extra={"max_steps": 5, "bf16": False}), Path("/d"), Path("/c"))
    assert passed["max_steps"] == 5 and passed["bf16"] is False
    with pytest.raises(ValueError, match="full' or 'lora"):
        sft_config(TrainSettings(finetuning_type="qlora-ish"), Path("/d"), Path("/c"))
    with pytest.raises(ValueError, match=r"\['output_dir'\] are set by the pipeline"):
        sft_config(TrainSettings(extra={"output_dir": "/elsewhere"}), Path("/d"), Path("/c"))


def _version(mixture="sft-aaa", settings=TrainSettings(), gpus=2, nodes=1, revision="main", versions=None):
    return checkpoint_version(
        mixture,
        settings,
        gpus,
        nodes,
        revision=revision,
        versions=versions or {"llamafactory": "0.9.5", "transformers": "5.6.0"},
    )


def test_checkpoint_version_is_mixture_and_settings(tmp_path):
    base = _version()
    assert base == _version() and base.startswith("ckpt-")
    assert (
        len(
            {
                base,
                _version("sft-bbb"),
                _version(gpus=1),
                _version(nodes=2),
                _version(settings=TrainSettings(learning_rate=1e-5)),
                _version(settings=TrainSettings(extra={"max_steps": 3})),
                _version(revision="0123abc"),
                _version(versions={"llamafactory": "0.9.5", "transformers": "5.7.0"}),
            }
        )
        == 8
    )
    cfg = sft_config(
        TrainSettings(), tmp_path, tmp_path / "out", gpus=2, deepspeed_path=tmp_path / "out" / "ds_z3_config.json"
    )
    written = write_config(cfg, tmp_path / "out" / "train.yaml", zero3_path=tmp_path / "out" / "ds_z3_config.json")
    assert yaml.safe_load(written.read_text()) == cfg
    assert json.loads((tmp_path / "out" / "ds_z3_config.json").read_text())["zero_optimization"]["stage"] == 3


def test_run_report_reads_llamafactory_outputs(tmp_path):
    with pytest.raises(FileNotFoundError, match="did not finish training"):
        run_report(tmp_path)
    (tmp_path / "all_results.json").write_text(json.dumps({"train_loss": 2.5, "train_runtime": 3.0}))
    (tmp_path / "trainer_log.jsonl").write_text(
        "\n".join(
            json.dumps(r)
            for r in [
                {
                    "current_steps": 1,
                    "total_steps": 2,
                    "loss": 3.0,
                    "lr": 1e-5,
                    "epoch": 0.5,
                    "total_tokens": 100,
                    "throughput": 50.0,
                },
                {"current_steps": 2, "total_steps": 2, "eval_loss": 2.9},
                {
                    "current_steps": 2,
                    "total_steps": 2,
                    "loss": 2.0,
                    "lr": 0.0,
                    "epoch": 1.0,
                    "total_tokens": 200,
                    "throughput": 60.0,
                },
            ]
        )
    )
    for step in (10, 2):
        (tmp_path / f"checkpoint-{step}").mkdir()
    report = run_report(tmp_path)
    assert report["metrics"]["train_loss"] == 2.5 and report["saved_checkpoints"] == ["checkpoint-2", "checkpoint-10"]
    assert [(r["step"], r["loss"], r["tokens_per_s"]) for r in report["loss_curve"]] == [(1, 3.0, 50.0), (2, 2.0, 60.0)]
    png = loss_plot(report["loss_curve"], tmp_path / "loss.png", "t")
    assert png.startswith(b"\x89PNG") and (tmp_path / "loss.png").read_bytes() == png


def _local_job(tmp_path, script, timeout_s=None, during=None):
    """Materialize one asset that runs ``script`` as a local job (Dagster's PipesSubprocessClient); returns
    (success, the JobFailed raised or None, the lines the run's log got from the job, the job directory)."""
    from resources import JobLauncherResource

    seen: dict = {"lines": []}

    @asset
    def local_job(context: AssetExecutionContext, launcher: JobLauncherResource) -> MaterializeResult:
        context.log.info = seen["lines"].append  # the log lines followed from the job
        seen["workdir"] = launcher.job_workdir(context, "job")
        if during:
            threading.Thread(target=during, args=(seen["workdir"],), daemon=True).start()
        try:
            job, _ = launcher.run_with_pipes(context, "job", script, {}, timeout_s=timeout_s)
        except JobFailed as exc:
            seen["failed"] = exc
            raise
        return MaterializeResult(metadata={"job_id": job.job_id})

    result = materialize(
        [local_job], resources={"launcher": JobLauncherResource(workdir=str(tmp_path / "jobs"))}, raise_on_error=False
    )
    return result.success, seen.get("failed"), seen["lines"], seen["workdir"]


def test_local_job_success_reports_its_log(tmp_path):
    ok, failed, lines, workdir = _local_job(tmp_path, "echo one; echo two\n")
    assert ok and failed is None
    assert [line for line in lines if line in ("one", "two")] == ["one", "two"]
    assert (workdir / "job.log").read_text() == "one\ntwo\n" and (workdir / "job.sh").exists()


def test_local_job_failure_is_reported_with_its_log_tail(tmp_path):
    ok, failed, _, _ = _local_job(tmp_path, "echo boom; exit 3\n")
    assert not ok and failed.state == "FAILED" and "failed with exit code 3" in str(failed)
    assert "boom" in failed.log_tail and "--- log tail ---\nboom" in str(failed)


def _wait_for(path, timeout_s=20):
    deadline = time.monotonic() + timeout_s
    while not (path.exists() and path.read_text().strip()):
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)
    return int(path.read_text().split()[0])


def test_local_job_killed_is_reported_and_its_process_group_ended(tmp_path):
    """The job's shell is killed (as by the OOM killer): reported as killed with its log tail, and what it
    started in the background (here a sleep that ignores SIGINT and SIGTERM) is ended with the group."""

    def kill_the_shell(workdir):
        os.kill(_wait_for(workdir / "shell.pid"), signal.SIGKILL)

    # the job runs in the repository ($OLDPWD: its job directory)
    script = (
        'echo started\n(trap "" INT TERM; exec sleep 120) & echo $! > "$OLDPWD/child.pid"\necho $$ > '
        '"$OLDPWD/shell.pid"\nwait\n'
    )
    ok, failed, _, workdir = _local_job(tmp_path, script, during=kill_the_shell)
    assert not ok and failed.state == "CANCELLED" and "killed by signal 9 (SIGKILL)" in str(failed)
    assert "started" in failed.log_tail
    child = int((workdir / "child.pid").read_text())
    deadline = time.monotonic() + 5
    while running(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not running(child), "the job's background process survived the failed job"


_TERMINATED = """
import os, signal, sys, threading, time
from pathlib import Path
from dagster import AssetExecutionContext, MaterializeResult, asset, materialize
from resources import JobLauncherResource

out = Path(sys.argv[1])

@asset
def job(context: AssetExecutionContext, launcher: JobLauncherResource) -> MaterializeResult:
    launcher.run_with_pipes(context, "job", f'(trap "" INT TERM; exec sleep 120) & echo $! > {out}/child.pid\\necho \
started\\nsleep 100\\n', {})
    return MaterializeResult()

def interrupt():  # what terminating the run does to the step's process
    while not (out / "child.pid").exists():
        time.sleep(0.05)
    time.sleep(0.3)
    os.kill(os.getpid(), signal.SIGINT)

threading.Thread(target=interrupt, daemon=True).start()
result = materialize([job], resources={"launcher": JobLauncherResource(workdir=str(out / "jobs"))}, \
raise_on_error=False)
print("success" if result.success else "failed")
"""


def test_local_job_of_a_terminated_run_is_ended_with_its_process_group(tmp_path):
    """The run is terminated (SIGINT in the step's process): Dagster's client forwards SIGINT to the job, and
    what ignores it (a background process trapping INT and TERM) is killed with the job's process group."""
    out = subprocess.run(
        [sys.executable, "-c", _TERMINATED, str(tmp_path)],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.stdout.strip().endswith("failed"), out.stdout[-2000:] + out.stderr[-3000:]
    assert "[pipes] execution interrupted, sending SIGINT to subprocess" in out.stderr
    child = int((tmp_path / "child.pid").read_text())
    deadline = time.monotonic() + 5
    while running(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not running(child), "the terminated job's background process survived"


def test_local_job_time_limit_ends_the_group(tmp_path):
    start = time.monotonic()
    ok, failed, _, _ = _local_job(tmp_path, "echo waiting; sleep 30\n", timeout_s=1)
    assert not ok and failed.state == "TIMEOUT" and "exceeded its time limit of 1s" in str(failed)
    assert "waiting" in failed.log_tail and time.monotonic() - start < 20


def _job_resources(layout, launcher):
    from resources import DataStoreResource

    return {
        "store": DataStoreResource(data_root=str(layout.root)),
        "launcher": launcher,
        "duckdb": DuckDBResource(database=str(layout.root / "jobs.duckdb")),
    }


def test_eval_job_reports_through_pipes_and_lands_in_duckdb(split_layout):
    from assets.training import simulator_eval_job
    from resources import JobLauncherResource

    launcher = JobLauncherResource(backend="local", workdir=str(split_layout.root / "jobs"))
    result = materialize([simulator_eval_job], resources=_job_resources(split_layout, launcher))
    assert result.success
    meta = result.get_asset_materialization_events()[0].event_specific_data.materialization.metadata
    assert "oracle@" in text(meta["summary"]) and "no_change" in text(meta["cm_by_group_from_job"])
    con = duckdb.connect(str(split_layout.root / "jobs.duckdb"), read_only=True)
    assert dict(con.execute("SELECT simulator, cm FROM eval_runs").fetchall())["oracle"] == 100.0


def test_training_job_fails_before_submission_without_llamafactory(split_layout):
    from assets.training import sft_training
    from resources import JobLauncherResource

    # the main environment's Python has no LLaMA-Factory next to it
    launcher = JobLauncherResource(
        backend="local", workdir=str(split_layout.root / "jobs"), llamafactory_python=sys.executable
    )
    result = materialize([sft_training], resources=_job_resources(split_layout, launcher), raise_on_error=False)
    assert not result.success
    failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    error = failure.event_specific_data.error
    assert "llamafactory-cli not found next to" in (error.cause.message if error.cause else error.message)
    assert not list((split_layout.root / "jobs").glob("sft-train-*")), "nothing may be submitted"


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
    from assets.training import simulator_eval_job
    from resources import JobLauncherResource

    launcher = JobLauncherResource(
        backend="slurm",
        slurm_conf=str(slurm.conf),
        jobcomp=str(slurm.jobcomp),
        workdir=str(split_layout.root / "slurm-jobs"),
        cpus=1,
    )
    result = materialize(
        [simulator_eval_job],
        resources=_job_resources(split_layout, launcher),
        run_config={
            "ops": {
                "simulator_eval_job": {"config": {"simulators": [{"name": "no_change_slurm", "kind": "no_change"}]}}
            }
        },
    )
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
def test_slurm_requeued_job_runs_its_script_again(slurm, tmp_path):
    """`scontrol requeue` (what preemption with PreemptMode=REQUEUE does): the launcher follows the job through
    its second start, and the log keeps both runs."""
    marker = tmp_path / "first-run"
    script = f"if [ ! -e {marker} ]; then touch {marker}; echo first run; sleep 120; fi\necho second run\n"
    launcher = _slurm_launcher(slurm, pending_timeout_s=5)

    def requeue():
        while not marker.exists():
            time.sleep(0.1)
        time.sleep(1)
        subprocess.run(
            ["scontrol", "requeue", launcher.job_id], env={**os.environ, **slurm.env}, check=True, capture_output=True
        )

    threading.Thread(target=requeue, daemon=True).start()
    start = time.monotonic()
    result = launcher.run(JobSpec("requeued", script, tmp_path, requeue=True, cpus=1), timeout_s=400)
    assert result.state == "COMPLETED"
    assert time.monotonic() - start < 90  # the test cluster starts a requeued job again within seconds, not minutes
    assert [line for line in result.log.read_text().splitlines() if line.endswith(" run")] == [
        "first run",
        "second run",
    ]


@pytest.mark.slow
def test_slurm_time_limit(slurm, tmp_path):
    """A job that runs past its time limit is ended by Slurm and reported TIMEOUT (TimeLimit). The spec's limit (one
    minute, Slurm's smallest) is the job's TimeLimit; once the job runs, its end is moved to now (`scontrol update
    EndTime=now`), so slurmctld's time-limit pass (every 30 s, a constant of slurmctld) ends it at its next pass
    rather than 60-90 s after the start."""
    launcher = _slurm_launcher(slurm)
    seen: dict[str, str] = {}

    def scontrol(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["scontrol", *args], env={**os.environ, **slurm.env}, capture_output=True, text=True)

    def end_now():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            job = launcher.job_id and scontrol("show", "job", "-o", launcher.job_id).stdout
            if job and "JobState=RUNNING" in job:
                seen["limit"] = re.search(r"TimeLimit=(\S+)", job).group(1)
                seen["update"] = scontrol("update", f"JobId={launcher.job_id}", "EndTime=now").stderr
                return
            time.sleep(0.2)

    threading.Thread(target=end_now, daemon=True).start()
    start = time.monotonic()
    with pytest.raises(JobFailed, match=r"ended TIMEOUT with exit code \d+ \(TimeLimit\)"):
        launcher.run(JobSpec("tl", "sleep 300\n", tmp_path, time_limit_min=1))
    assert seen == {"limit": "00:01:00", "update": ""}, seen
    assert time.monotonic() - start < 200


def test_checkpoints_publish_resolve_and_lineage_tables(tmp_path):
    from pipeline.training import checkpoints

    root = tmp_path / "data"
    with pytest.raises(FileNotFoundError, match="materialize 'sft_training' first"):
        checkpoints.resolve(root, "latest")
    settings = {"model_name_or_path": "m", "finetuning_type": "full", "template": "qwen"}
    for version, loss in (("ckpt-aaa", 2.0), ("ckpt-aaa", 1.5), ("ckpt-bbb", 1.0)):  # ckpt-aaa trained twice
        staging = root / "checkpoints" / f".{version}.run-x"
        staging.mkdir(parents=True)
        (staging / "model.safetensors").write_text(str(loss))
        checkpoints.publish(
            staging,
            root / "checkpoints" / version,
            {
                "checkpoint_version": version,
                "mixture_version": "sft-1",
                "settings": settings,
                "gpus": 1,
                "metrics": {"train_loss": loss},
            },
        )
    assert sorted(p.name for p in (root / "checkpoints").iterdir()) == ["LATEST", "ckpt-aaa", "ckpt-bbb"]
    path, manifest = checkpoints.resolve(root, "latest")
    assert path.name == "ckpt-bbb" and manifest["mixture_version"] == "sft-1"
    path, manifest = checkpoints.resolve(root, "ckpt-aaa")
    assert (path / "model.safetensors").read_text() == "1.5" and manifest["metrics"]["train_loss"] == 1.5
    assert checkpoints.resolve(root, str(tmp_path))[1] is None  # a directory trained elsewhere: no manifest
    with pytest.raises(FileNotFoundError, match="not found"):
        checkpoints.resolve(root, "ckpt-zzz")
    con = duckdb.connect()
    assert checkpoints.sync_checkpoints(con, root) == 2
    assert checkpoints.sync_checkpoints(con, root) == 2  # replaced, not duplicated
    assert con.execute(
        "SELECT checkpoint_version, mixture_version, train_loss FROM sft_checkpoints ORDER BY 1"
    ).fetchall() == [("ckpt-aaa", "sft-1", 1.5), ("ckpt-bbb", "sft-1", 1.0)]
    checkpoints.record_eval_runs(
        con,
        [
            {
                "run_id": "ckpt-bbb@bench-1",
                "simulator": "ckpt-bbb",
                "split_version": "bench-1",
                "served_model": "ckpt-bbb",
                "checkpoint_version": "ckpt-bbb",
                "template": "qwen",
            }
        ],
    )
    assert con.execute("SELECT run_id, checkpoint_version, template FROM eval_job_runs").fetchall() == [
        ("ckpt-bbb@bench-1", "ckpt-bbb", "qwen")
    ]


def test_weights_fingerprint_hashes_the_weight_files_once(tmp_path, monkeypatch):
    from pipeline.training import checkpoints

    ckpt = tmp_path / "final"
    ckpt.mkdir()
    with pytest.raises(FileNotFoundError, match="holds no weight file"):
        checkpoints.weights_fingerprint(ckpt)
    (ckpt / "model-00001-of-00002.safetensors").write_bytes(b"a" * 1000)
    (ckpt / "model-00002-of-00002.safetensors").write_bytes(b"b" * 1000)
    (ckpt / "config.json").write_text("{}")
    (ckpt / "checkpoint-200").mkdir()
    (ckpt / "checkpoint-200" / "model.safetensors").write_bytes(b"an intermediate save")
    first = checkpoints.weights_fingerprint(ckpt)
    read = []
    real = checkpoints._file_sha256
    monkeypatch.setattr(checkpoints, "_file_sha256", lambda path: read.append(path.name) or real(path))
    (ckpt / "config.json").write_text('{"not": "weights"}')
    (ckpt / "checkpoint-200" / "model.safetensors").write_bytes(b"another intermediate save")
    assert checkpoints.weights_fingerprint(ckpt) == first and read == []  # cached by (name, size, mtime)
    (ckpt / "model-00002-of-00002.safetensors").write_bytes(b"c" * 1000)  # same size, other weights
    os.utime(ckpt / "model-00002-of-00002.safetensors", ns=(1, 1))
    second = checkpoints.weights_fingerprint(ckpt)
    assert second != first and read == ["model-00002-of-00002.safetensors"]
    assert checkpoints.weights_id(ckpt, None) == f"sha256-{second[:16]}"
    assert checkpoints.weights_id(ckpt, {"checkpoint_version": "ckpt-0123456789ab"}) == "ckpt-0123456789ab"
    assert checkpoints.default_served_name(ckpt, f"sha256-{second[:16]}", None) == f"final-sha256-{second[:16]}"
    assert (
        checkpoints.default_served_name(ckpt, "ckpt-0123456789ab", {"checkpoint_version": "ckpt-0123456789ab"})
        == "ckpt-0123456789ab"
    )
    # a LoRA adapter is served on its base: another base is other weights
    on_a = checkpoints.served_weights_id(ckpt, None, "org/base-a")
    assert on_a.startswith("sha256-") and on_a != checkpoints.served_weights_id(ckpt, None, "org/base-b")
    manifest = {"checkpoint_version": "ckpt-0123456789ab", "settings": {"model_name_or_path": "org/base-a"}}
    assert checkpoints.served_weights_id(ckpt, manifest, "org/base-a") == "ckpt-0123456789ab"


FAKE_LLAMAFACTORY_CLI = """#!{python}
# a stand-in for `llamafactory-cli api <config>`: the fake OpenAI endpoint on API_PORT serving API_MODEL_NAME;
# a checkpoint directory with an answers.json answers with it (prompt -> answer), any other answers wrongly
import json, os, sys, threading
from pathlib import Path
import yaml
sys.path.insert(0, {repo!r})
from tests.support.fake_openai import FakeOpenAI
checkpoint = Path(yaml.safe_load(Path(sys.argv[2]).read_text())["model_name_or_path"])
known = (checkpoint / "answers.json").exists()
answers = json.loads((checkpoint / "answers.json").read_text()) if known else {{}}
with FakeOpenAI(answers, "correct" if known else "wrong", port=int(os.environ["API_PORT"]), \
models=(os.environ["API_MODEL_NAME"],)):
    threading.Event().wait()
"""


def test_eval_job_caches_a_served_checkpoint_by_its_weights_not_its_name(split_layout, tmp_path):
    """Issue 25: two checkpoints trained elsewhere, in directories of the same basename, served one after the
    other under one served name: the second is scored in full (not resumed from the first), and its rows,
    run and lineage carry its own weights id."""
    from assets.training import simulator_eval_job
    from pipeline.core.protocol import answer, messages
    from pipeline.evaluate.samples import load_samples
    from pipeline.training import checkpoints
    from resources import JobLauncherResource

    env = tmp_path / "lf-env" / "bin"
    env.mkdir(parents=True)
    (env / "python").write_text("")
    cli = env / "llamafactory-cli"
    cli.write_text(FAKE_LLAMAFACTORY_CLI.format(python=sys.executable, repo=str(Path(__file__).resolve().parents[2])))
    cli.chmod(0o755)
    _, samples = load_samples(split_layout, None, max_samples=4)
    one, two = tmp_path / "one" / "final", tmp_path / "two" / "final"
    for ckpt, weights in ((one, b"weights of the first run"), (two, b"weights of the second run")):
        ckpt.mkdir(parents=True)
        (ckpt / "model.safetensors").write_bytes(weights)
    (one / "answers.json").write_text(json.dumps({messages(s)[1]["content"]: answer(s) for s in samples}))
    launcher = JobLauncherResource(
        backend="local", workdir=str(split_layout.root / "jobs"), llamafactory_python=str(env / "python")
    )
    resources = _job_resources(split_layout, launcher)

    def evaluate(ckpt):
        serve = {
            "checkpoint": str(ckpt),
            "template": "qwen",
            "backend": "huggingface",
            "served_model_name": "sim",
            "ready_timeout_s": 60,
            "max_retries": 0,
        }
        result = materialize(
            [simulator_eval_job],
            resources=resources,
            run_config={
                "ops": {"simulator_eval_job": {"config": {"serve": serve, "simulators": [], "max_samples": 4}}}
            },
        )
        assert result.success
        return result.get_asset_materialization_events()[0].event_specific_data.materialization.metadata

    first, second = evaluate(one), evaluate(two)
    with duckdb.connect(str(split_layout.root / "jobs.duckdb"), read_only=True) as con:
        # 4 answers of each checkpoint; only the first one's are right (not its scores recorded for the second)
        assert con.execute("SELECT count(*), sum(fm::INT) FROM eval_results WHERE simulator = 'sim'").fetchone() == (
            8,
            4,
        )
    wid_one, wid_two = (checkpoints.weights_id(c, None) for c in (one, two))
    assert wid_one != wid_two and wid_two.startswith("sha256-")
    assert (first["served_model"].value, first["weights_id"].value, first["scored"].value, first["resumed"].value) == (
        "sim",
        wid_one,
        4,
        0,
    )
    assert (
        second["served_model"].value,
        second["weights_id"].value,
        second["scored"].value,
        second["resumed"].value,
    ) == ("sim", wid_two, 4, 0)
    con = duckdb.connect(str(split_layout.root / "jobs.duckdb"), read_only=True)
    try:
        scores = {
            r[1]: r
            for r in con.execute(
                "SELECT run_id, weights_id, count(*), sum(cm::INT), sum(fm::INT) FROM eval_results "
                "WHERE simulator = 'sim' GROUP BY ALL"
            ).fetchall()
        }
        version = first["split_version"].value
        assert scores == {
            wid_one: (f"sim+{wid_one}@{version}", wid_one, 4, 4, 4),
            wid_two: (f"sim+{wid_two}@{version}", wid_two, 4, 0, 0),
        }
        lineage = con.execute(
            "SELECT weights_id, served_model, checkpoint_path FROM eval_job_runs WHERE simulator = 'sim'"
        ).fetchall()
        assert sorted(lineage) == sorted([(wid_one, "sim", str(one)), (wid_two, "sim", str(two))])
    finally:
        con.close()
    again = evaluate(two)  # the same weights again: nothing is asked
    assert (again["scored"].value, again["resumed"].value) == (0, 4)


def test_launcher_finds_the_llamafactory_environment(tmp_path, monkeypatch):
    from pipeline.core.settings import Settings
    from resources import JobLauncherResource
    from resources.sets import resources_for

    env = tmp_path / "venv" / "bin"
    env.mkdir(parents=True)
    (env / "python").write_text("")
    with pytest.raises(FileNotFoundError, match="llamafactory-cli not found next to"):
        JobLauncherResource(llamafactory_python=str(env / "python")).llamafactory()
    (env / "llamafactory-cli").write_text(f"#!{env / 'python'}\n")
    assert JobLauncherResource(llamafactory_python=str(env / "python")).llamafactory() == (
        str(env / "python"),
        str(env / "llamafactory-cli"),
    )
    monkeypatch.setenv("ENVSIM_LLAMAFACTORY_PYTHON", str(env / "python"))  # the entry point's to read, not a resource's
    try:
        found = JobLauncherResource().llamafactory()
    except FileNotFoundError:
        found = None
    assert found is None or found[1] != str(env / "llamafactory-cli")
    launcher = resources_for(Settings(llamafactory_python=str(env / "python")))["launcher"]  # the code location's way
    assert launcher.llamafactory()[1] == str(env / "llamafactory-cli")


# --- the training recipe across GPU counts, its identity, its job ------------------------------------------


def test_global_batch_is_held_across_gpu_counts():
    """The recipe's global batch (32) stays 32 on any number of GPUs: the accumulation follows them."""

    def accumulation(gpus, nodes=1, **kw):
        return sft_config(
            TrainSettings(**kw), Path("/d"), Path("/c"), gpus=gpus, nodes=nodes, deepspeed_path=Path("/c/ds.json")
        )["gradient_accumulation_steps"]

    assert [accumulation(g) for g in (0, 1, 2, 4, 8)] == [32, 32, 16, 8, 4]
    assert accumulation(4, nodes=2) == 4 and accumulation(2, per_device_train_batch_size=4) == 4
    assert accumulation(2, global_batch_size=64) == 32
    with pytest.raises(
        ValueError, match=r"^global_batch_size 32 is not a multiple of per_device_train_batch_size 3 × 1 GPU"
    ):
        accumulation(1, per_device_train_batch_size=3)
    with pytest.raises(ValueError, match=r"\['gradient_accumulation_steps'\] are set by the pipeline"):
        sft_config(TrainSettings(extra={"gradient_accumulation_steps": 4}), Path("/d"), Path("/c"))
    assert "\n" not in str(pytest.raises(ValueError, accumulation, 3).value)


def test_seed_and_experiment_tracking_reach_llamafactory(tmp_path):
    cfg = sft_config(TrainSettings(seed=7), tmp_path, tmp_path / "out")
    assert (cfg["seed"], cfg["data_seed"]) == (7, 7) and cfg["report_to"] == "none" and "logging_dir" not in cfg
    board = TrainSettings(report_to="tensorboard")
    assert sft_config(board, tmp_path, tmp_path / "out", run_name="ckpt-x")["report_to"] == "tensorboard"
    assert tracking_env(board, tmp_path / "out") == {"TENSORBOARD_LOGGING_DIR": str(tmp_path / "out" / "tensorboard")}
    assert tracking_env(TrainSettings(), tmp_path / "out") == {}
    wandb = sft_config(TrainSettings(report_to="wandb"), tmp_path, tmp_path / "out", run_name="ckpt-x")
    assert wandb["report_to"] == "wandb" and wandb["run_name"] == "ckpt-x"
    with pytest.raises(ValueError, match="report_to must be one of none, tensorboard, wandb"):
        sft_config(TrainSettings(report_to="mlflow"), tmp_path, tmp_path / "out")
    python = str(fake_llamafactory.make_env(tmp_path / "env"))  # has neither tensorboard nor wandb
    assert validate(sft_config(TrainSettings(seed=7), tmp_path, tmp_path / "out"), python) == ["bf16"]
    for tracker in ("tensorboard", "wandb"):
        with pytest.raises(
            InvalidTrainingArguments, match=f"report_to {tracker} needs the {tracker} package in .*: pip install"
        ):
            validate(sft_config(TrainSettings(report_to=tracker), tmp_path, tmp_path / "out"), python)


def test_base_model_revision_and_library_versions_make_the_checkpoint_version(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text('{"hidden_size": 64}')
    (model / "model.safetensors").write_bytes(b"0" * 10)
    (model / "tokenizer.json").write_text("{}")
    local = TrainSettings(model_name_or_path=str(model))
    first = base_model_revision(local)
    assert first.startswith("files:")
    (model / "tokenizer.json").write_text('{"changed": true}')
    assert base_model_revision(local) == first, "only the config and the weight files identify the weights"
    (model / "model.safetensors").write_bytes(b"0" * 11)
    second = base_model_revision(local)
    (model / "config.json").write_text('{"hidden_size": 128}')
    assert len({first, second, base_model_revision(local)}) == 3
    assert base_model_revision(TrainSettings(model_name_or_path=str(model), model_revision="my-run-7")) == "my-run-7"
    assert base_model_revision(TrainSettings()) == "main"
    assert base_model_revision(TrainSettings(model_revision="9f1c2e")) == "9f1c2e"
    assert sft_config(TrainSettings(model_revision="9f1c2e"), tmp_path, tmp_path / "o")["model_revision"] == "9f1c2e"
    assert sft_config(TrainSettings(), tmp_path, tmp_path / "o")["model_revision"] == "main"
    assert "model_revision" not in sft_config(local, tmp_path, tmp_path / "o")  # a directory has no Hub revision

    python = fake_llamafactory.make_env(tmp_path / "env", versions={"transformers": "5.7.0"})
    versions = library_versions(str(python))
    assert versions["llamafactory"] == "0.9.5" and versions["transformers"] == "5.7.0" and versions["peft"] is None
    assert _version(versions=versions) != _version(versions={**versions, "transformers": "5.6.0"})


def test_envsimbench_dataset_is_a_training_choice(split_layout, tmp_path):
    export = split_layout.export_current("sft_mixture")
    for name in ("envsim_chat", "envsim_alpaca", "envsim_envsimbench_alpaca"):
        check_dataset(export, name)
    ours = tmp_path / "export"
    ours.mkdir()
    (ours / "dataset_info.json").write_text(json.dumps({"envsim_chat": {}, "envsim_alpaca": {}}))
    with pytest.raises(
        ValueError,
        match=r"^dataset 'envsim_envsimbench_alpaca' is not in .*dataset_info.json "
        r"\(it holds envsim_alpaca, envsim_chat\): .*envsimbench_format: true",
    ) as err:
        check_dataset(ours, "envsim_envsimbench_alpaca")
    assert "\n" not in str(err.value)


def test_training_job_asks_for_its_cpus_memory_and_time(tmp_path):
    """--cpus-per-task follows the tokenizing workers (at least one per GPU), --mem the GPUs, --time a day;
    what the launcher sets wins, and a launcher that fixes the CPUs gets at most that many workers."""
    from resources import JobLauncherResource

    def sbatch(launcher, needs, gpus):
        spec = launcher.job_spec(tmp_path, "sft-train", "true\n", gpus=gpus, needs=needs)
        return [
            line for line in SlurmLauncher().script(spec, tmp_path / "x.log").splitlines() if line.startswith("#SBATCH")
        ]

    needs, workers = train_needs(TrainSettings(), gpus=4)
    assert (needs.cpus, needs.mem_gb, needs.time_limit_min, workers) == (16, 128, 1440, 16)
    lines = sbatch(JobLauncherResource(backend="slurm"), needs, 4)
    assert {"#SBATCH --cpus-per-task=16", "#SBATCH --mem=128G", "#SBATCH --time=1440", "#SBATCH --gres=gpu:4"} <= set(
        lines
    )
    assert train_needs(TrainSettings(preprocessing_num_workers=2), gpus=8)[0].cpus == 8
    fixed = JobLauncherResource(backend="slurm", cpus=8, mem_gb=64, time_limit_min=600)
    needs, workers = train_needs(TrainSettings(), gpus=4, cpus=fixed.cpus)
    assert workers == 8 and {"#SBATCH --cpus-per-task=8", "#SBATCH --mem=64G", "#SBATCH --time=600"} <= set(
        sbatch(fixed, needs, 4)
    )
    evaluation = sbatch(JobLauncherResource(backend="slurm"), JobNeeds(), 0)
    assert "#SBATCH --cpus-per-task=2" in evaluation and not any(
        line.startswith(("#SBATCH --mem", "#SBATCH --time")) for line in evaluation
    )


def test_slurm_script_requeues_runs_on_several_nodes_and_exports_the_hub_cache(tmp_path):
    spec = JobSpec(
        "sft-train", "echo hi\n", tmp_path, gpus=4, nodes=2, requeue=True, hf_home="/shared/hf", hf_offline=True
    )
    text = SlurmLauncher().script(spec, tmp_path / "x.log")
    for line in (
        "#SBATCH --requeue",
        "#SBATCH --open-mode=append",
        "#SBATCH --nodes=2",
        "#SBATCH --ntasks-per-node=1",
        "export HF_HOME=/shared/hf",
        "export HF_HUB_OFFLINE=1",
        "export TRANSFORMERS_OFFLINE=1",
    ):
        assert line in text.splitlines(), line
    plain = SlurmLauncher().script(JobSpec("eval", "true\n", tmp_path), tmp_path / "x.log")
    assert "--requeue" not in plain and "--nodes" not in plain and "HF_HOME" not in plain
    with pytest.raises(
        ValueError, match="^the local launcher runs a job on this machine only: set nodes: 1 or use the slurm backend$"
    ):
        local_job(JobSpec("sft-train", "true\n", tmp_path, nodes=2))


def _write_fake_tools(bin_dir: Path, nodes: list[str]) -> Path:
    """Stand-ins for nvidia-smi, scontrol (hostnames) and srun (runs its command once per node, in order,
    with SLURM_NODEID set, and records its options)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    tools = {
        "nvidia-smi": 'echo "GPU 0: stand-in"\n',
        "scontrol": f'[ "$1 $2" = "show hostnames" ] || exit 1\nprintf "%s\\n" {" ".join(nodes)}\n',
        "srun": f'echo "$@" >> {bin_dir}/srun.args\nwhile [ "${{1#--}}" != "$1" ]; do shift; done\n'
        f'for i in $(seq 0 $((SLURM_JOB_NUM_NODES - 1))); do SLURM_NODEID=$i "$@" || exit $?; done\n',
    }
    for name, body in tools.items():
        (bin_dir / name).write_text("#!/bin/bash\n" + body)
        (bin_dir / name).chmod(0o755)
    return bin_dir


def _script_run(tmp_path, split_layout, settings, gpus, nodes, env):
    """The training job's script as the asset writes it, ready to run with bash (twice, as Slurm re-runs a
    requeued job)."""
    python = fake_llamafactory.make_env(tmp_path / "env")
    out = tmp_path / "run"
    cfg = sft_config(
        settings,
        split_layout.export_current("sft_mixture"),
        out,
        gpus=gpus,
        nodes=nodes,
        deepspeed_path=out / "ds_z3_config.json",
    )
    path = write_config(cfg, out / "llamafactory_train.yaml", zero3_path=out / "ds_z3_config.json")
    steps.start_run(out, "ckpt-script", "sft-script")
    script = train_script(
        str(python.parent / "llamafactory-cli"), path, out, sys.executable, "echo reported", gpus, nodes
    )
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **launch_env(gpus, nodes), **env}

    def run():
        return subprocess.run(
            ["bash", "-c", "set -euo pipefail\ncd " + str(ROOT) + "\n" + script],
            env=full_env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    return out, run


def test_job_script_resumes_when_rerun(split_layout, tmp_path):
    """A requeued Slurm job runs its script again: it continues from the latest complete checkpoint."""
    settings = TrainSettings(
        bf16=False,
        global_batch_size=1,
        save_steps=2,
        save_total_limit=5,
        preprocessing_num_workers=1,
        extra={"max_steps": 6},
    )
    out, run = _script_run(tmp_path, split_layout, settings, 0, 1, {"FAKE_LF_STOP_AT": "5"})
    first = run()
    assert first.returncode == 143 and "reported" not in first.stdout
    (out / "checkpoint-6").mkdir()  # a save the preemption cut short: no trainer_state.json yet
    (out / "checkpoint-6" / "model.safetensors").write_text("torn")
    second = run()
    assert second.returncode == 0, second.stdout[-2000:] + second.stderr[-2000:]
    assert "reported" in second.stdout and f"resuming from {out / 'checkpoint-4'}" in second.stdout
    one, two = fake_llamafactory.calls(out)
    assert (one["resume"], one["start"]) == (None, 0) and (two["resume"], two["start"]) == (
        str(out / "checkpoint-4"),
        4,
    )
    assert (out / "checkpoint-6" / "optimizer.pt").exists() and (out / "all_results.json").exists()
    recorded = steps.read_steps(out)
    assert [(r["checkpoint_version"], r["parent_version"], r["mixture_version"], r["step"]) for r in recorded] == [
        ("ckpt-script/step-2", "ckpt-script", "sft-script", 2),
        ("ckpt-script/step-4", "ckpt-script", "sft-script", 4),
        ("ckpt-script/step-6", "ckpt-script", "sft-script", 6),
    ]
    assert f"{steps.STEP_MARK}" in first.stdout, "each checkpoint is announced in the job log as it is written"


def test_multi_node_job_script_sets_the_torchrun_rendezvous(split_layout, tmp_path):
    tools = _write_fake_tools(tmp_path / "tools", ["node-a", "node-b"])
    settings = TrainSettings(bf16=False, save_steps=2, preprocessing_num_workers=1, extra={"max_steps": 2})
    out, run = _script_run(
        tmp_path,
        split_layout,
        settings,
        4,
        2,
        {
            "PATH": f"{tools}:{os.environ['PATH']}",
            "SLURM_JOB_ID": "4242",
            "SLURM_JOB_NUM_NODES": "2",
            "SLURM_JOB_NODELIST": "node-[a-b]",
        },
    )
    done = run()
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert (tools / "srun.args").read_text().split()[:3] == ["--nodes=2", "--ntasks=2", "--ntasks-per-node=1"]
    calls = fake_llamafactory.calls(out)
    assert [c["env"]["NODE_RANK"] for c in calls] == ["0", "1"]
    for call in calls:
        env = call["env"]
        assert (env["NNODES"], env["NPROC_PER_NODE"], env["FORCE_TORCHRUN"], env["MASTER_ADDR"]) == (
            "2",
            "4",
            "1",
            "node-a",
        )
        assert env["MASTER_PORT"] == calls[0]["env"]["MASTER_PORT"] and env["MASTER_PORT"].isdigit()
        assert env["PYTHONPATH"] is None and call["config"]["gradient_accumulation_steps"] == 4  # 32 / (1 × 4 × 2)


def test_slurm_launcher_follows_a_requeued_job(tmp_path):
    """A preempted job that Slurm requeues is followed until it completes: PREEMPTED is not its end, and the
    PENDING after a requeue is not held to pending_timeout_s (which guards a request that can never start)."""
    states = tmp_path / "states"
    states.write_text(
        "\n".join(
            [
                "JobState=PENDING Reason=Priority Restarts=0",
                "JobState=RUNNING Reason=None Restarts=0",
                "JobState=PREEMPTED Reason=None Restarts=0 ExitCode=0:15",
            ]
            + ["JobState=PENDING Reason=BeginTime Restarts=1"] * 6
            + ["JobState=RUNNING Reason=None Restarts=1", "JobState=COMPLETED Reason=None Restarts=1 ExitCode=0:0"]
        )
    )
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tools = {
        "sbatch": "echo 77\n",
        "scancel": f'echo "$@" >> {tmp_path}/scancel.args\n',
        "scontrol": f'line=$(head -n1 {states}); [ "$(wc -l < {states})" -gt 0 ] && sed -i 1d {states}\n'
        f'echo "JobId=77 ${{line:-JobState=COMPLETED ExitCode=0:0}} Requeue=1"\n',
    }
    for name, body in tools.items():
        (bin_dir / name).write_text("#!/bin/bash\n" + body)
        (bin_dir / name).chmod(0o755)
    launcher = SlurmLauncher(pending_timeout_s=0.3, poll_s=0.1, env={"PATH": f"{bin_dir}:{os.environ['PATH']}"})
    result = launcher.run(JobSpec("sft-train", "true\n", tmp_path / "job", requeue=True))
    assert (result.state, result.exit_code) == ("COMPLETED", 0) and not (tmp_path / "scancel.args").exists()


# --- sft_training as a user runs it, on a stand-in LLaMA-Factory (tests/support/fake_llamafactory.py) --------------

#: a few steps of the recipe on the stand-in: every argument but the step count is the asset's
FAKE_TRAIN = {
    "bf16": False,
    "save_steps": 2,
    "logging_steps": 1,
    "preprocessing_num_workers": 1,
    "gpus": 0,
    "extra_args": {"max_steps": 4},
}


@pytest.fixture(scope="module")
def fake_lf(tmp_path_factory):
    """(python of the stand-in LLaMA-Factory environment, a base model directory)."""
    root = tmp_path_factory.mktemp("fake-lf")
    model = root / "base-model"
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "qwen3"}')
    (model / "model.safetensors").write_bytes(b"\0" * 64)
    return fake_llamafactory.make_env(root / "env"), model


def _train(layout, fake_lf, config, **launcher):
    from assets.training import sft_training
    from resources import JobLauncherResource

    python, model = fake_lf
    resource = JobLauncherResource(
        backend="local", workdir=str(layout.root / "jobs"), llamafactory_python=str(python), **launcher
    )
    return materialize(
        [sft_training],
        resources=_job_resources(layout, resource),
        raise_on_error=False,
        run_config={"ops": {"sft_training": {"config": {"model_name_or_path": str(model), **config}}}},
    )


def _failure(result) -> str:
    failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    error = failure.event_specific_data.error
    return "\n".join(filter(None, [error.message, error.cause.message if error.cause else None]))


def _meta(result):
    return {
        k: v.value
        for k, v in result.get_asset_materialization_events()[0].event_specific_data.materialization.metadata.items()
    }


def test_multi_gpu_training_is_validated_with_its_zero3_file(split_layout, fake_lf, tmp_path, monkeypatch):
    """Two GPUs: ZeRO-3 by default. Its file exists when LLaMA-Factory's parser (lf_check.py) reads it,
    before submission; the job gets torchrun on both GPUs and the recipe's global batch."""
    monkeypatch.setenv("PATH", f"{_write_fake_tools(tmp_path / 'tools', ['node-a'])}:{os.environ['PATH']}")
    result = _train(split_layout, fake_lf, {**FAKE_TRAIN, "gpus": 2})
    assert result.success, _failure(result)
    meta = _meta(result)
    final = split_layout.root / "checkpoints" / meta["checkpoint_version"]
    cfg = yaml.safe_load((final / "llamafactory_train.yaml").read_text())
    assert Path(cfg["deepspeed"]).name == "ds_z3_config.json"
    assert json.loads((final / "ds_z3_config.json").read_text())["zero_optimization"]["stage"] == 3
    [call] = fake_llamafactory.calls(final)
    assert (call["env"]["FORCE_TORCHRUN"], call["env"]["NPROC_PER_NODE"]) == ("1", "2")
    assert call["config"]["gradient_accumulation_steps"] == 16
    manifest = json.loads((final / checkpoints.MANIFEST).read_text())
    assert manifest["library_versions"]["llamafactory"] == "0.9.5" and manifest["base_model_revision"].startswith(
        "files:"
    )
    assert (manifest["gpus"], manifest["nodes"]) == (2, 1)


def test_training_resumes_and_registers_every_checkpoint(split_layout, fake_lf, monkeypatch):
    """A run that ends early (preempted, timed out) leaves full checkpoints in its version's staging directory,
    each registered in SQL as it was written; materializing again continues from the latest; the steps and the
    published checkpoint are in DuckDB without any evaluation."""
    config = {**FAKE_TRAIN, "save_total_limit": 2, "extra_args": {"max_steps": 6}}
    monkeypatch.setenv("FAKE_LF_STOP_AT", "5")
    first = _train(split_layout, fake_lf, config)
    assert not first.success and "killed by signal 15 (SIGTERM)" in _failure(first)  # as Slurm ends a preempted job
    [staging] = [p for p in (split_layout.root / "checkpoints").glob(".ckpt-*.staging") if fake_llamafactory.calls(p)]
    version = json.loads((staging / steps.RUN_FILE).read_text())["checkpoint_version"]
    assert staging == checkpoints.staging_dir(split_layout.root, version)
    assert (staging / "checkpoint-4" / "optimizer.pt").exists()
    db = str(split_layout.root / "jobs.duckdb")
    with duckdb.connect(db, read_only=True) as con:
        assert con.execute(
            "SELECT checkpoint_version, parent_version, step, present FROM sft_checkpoint_steps "
            "WHERE parent_version = ? ORDER BY step",
            [version],
        ).fetchall() == [(f"{version}/step-2", version, 2, True), (f"{version}/step-4", version, 4, True)]

    second = _train(split_layout, fake_lf, config)
    assert second.success, _failure(second)
    assert _meta(second)["checkpoint_version"] == version and not staging.exists()
    final = split_layout.root / "checkpoints" / version
    one, two = fake_llamafactory.calls(final)
    assert one["resume"] is None and (two["resume"], two["start"]) == (str(staging / "checkpoint-4"), 4)
    assert "save_only_model" not in two["config"]
    mixture = json.loads((final / checkpoints.MANIFEST).read_text())["mixture_version"]
    with duckdb.connect(db, read_only=True) as con:
        rows = con.execute(
            "SELECT checkpoint_version, mixture_version, step, present, path FROM sft_checkpoint_steps "
            "WHERE parent_version = ? ORDER BY step",
            [version],
        ).fetchall()
        assert rows == [
            (f"{version}/step-2", mixture, 2, False, str(final / "checkpoint-2")),  # rotated away
            (f"{version}/step-4", mixture, 4, True, str(final / "checkpoint-4")),
            (f"{version}/step-6", mixture, 6, True, str(final / "checkpoint-6")),
        ]
        assert con.execute(
            "SELECT mixture_version, path FROM sft_checkpoints WHERE checkpoint_version = ?", [version]
        ).fetchall() == [(mixture, str(final))]
    path, manifest = checkpoints.resolve(split_layout.root, f"{version}/step-4")  # e.g. to serve it
    assert path == (final / "checkpoint-4").resolve() and manifest["checkpoint_version"] == f"{version}/step-4"
    assert manifest["parent_version"] == version and manifest["settings"]["template"] == "qwen"
    with pytest.raises(FileNotFoundError, match="rotated away by save_total_limit"):
        checkpoints.resolve(split_layout.root, f"{version}/step-2")


def test_training_job_gets_the_shared_hub_cache_offline(split_layout, fake_lf, tmp_path):
    result = _train(split_layout, fake_lf, {**FAKE_TRAIN, "seed": 3}, hf_home=str(tmp_path / "hf"), hf_offline=True)
    assert result.success, _failure(result)
    [call] = fake_llamafactory.calls(split_layout.root / "checkpoints" / _meta(result)["checkpoint_version"])
    assert (call["env"]["HF_HOME"], call["env"]["HF_HUB_OFFLINE"], call["env"]["TRANSFORMERS_OFFLINE"]) == (
        str(tmp_path / "hf"),
        "1",
        "1",
    )
    assert (call["config"]["seed"], call["config"]["data_seed"]) == (3, 3)


def test_training_on_the_published_envsimbench_format(split_layout, fake_lf):
    result = _train(split_layout, fake_lf, {**FAKE_TRAIN, "dataset": "envsim_envsimbench_alpaca"})
    assert result.success, _failure(result)
    [call] = fake_llamafactory.calls(split_layout.root / "checkpoints" / _meta(result)["checkpoint_version"])
    assert call["config"]["dataset"] == "envsim_envsimbench_alpaca"
    missing = _train(split_layout, fake_lf, {**FAKE_TRAIN, "dataset": "envsim_nope"})
    assert not missing.success and "dataset 'envsim_nope' is not in" in _failure(missing)
    assert not (split_layout.root / "jobs" / f"sft-train-{missing.run_id[:8]}").exists(), "nothing may be submitted"


def test_a_followed_log_hands_on_complete_lines_of_any_text(tmp_path):
    """A job's log read while it grows: each poll hands on the complete lines only, counted in bytes (a line of
    non-ASCII text cut mid-line, even mid-character, comes whole on a later poll, with no empty line)."""
    log, lines = tmp_path / "job.log", []
    follower = LogFollower(log, lines.append)
    follower.poll()  # no log yet
    with log.open("wb") as fh:
        fh.write("étape 1 ✓\nétape 2 ".encode() + "✓".encode()[:1])
        fh.flush()
        follower.poll()
        assert lines == ["étape 1 ✓"]
        fh.write("✓".encode()[1:] + b" fin\nnext\n")
        fh.flush()
        follower.poll()
    assert lines == ["étape 1 ✓", "étape 2 ✓ fin", "next"]
    follower.poll()
    assert lines == ["étape 1 ✓", "étape 2 ✓ fin", "next"]
