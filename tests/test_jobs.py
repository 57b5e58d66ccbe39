"""Jobs: launchers (local, real single-node Slurm), Dagster Pipes reporting, LLaMA-Factory configs."""

import json
import os
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

from pipeline.training.launchers import JobFailed, JobSpec, SlurmLauncher
from pipeline.training.llamafactory import (
    TrainSettings, checkpoint_version, launch_env, loss_plot, run_report, sft_config, write_config,
)
from pipeline.select.selection import build_benchmark, build_mixture
from pipeline.export.hf_layout import export_split
from tests.slurm_cluster import SlurmCluster
from tests.layouts import stratified_copy


@pytest.fixture(scope="module")
def split_layout(default_layout, tmp_path_factory):
    layout = stratified_copy(default_layout, tmp_path_factory.mktemp("jobs") / "data")
    build_benchmark(layout, seed=0, on_shortfall="warn")
    build_mixture(layout, {"failure": 5, "no_change": 50, "simple": 50, "complex": 20}, seed=0)
    export_split(layout, "sft_mixture", None, layout.root / "export" / "sft_mixture")
    return layout


def test_llamafactory_config_defaults_are_the_published_recipe():
    full = sft_config(TrainSettings(), Path("/data/export/sft"), Path("/ckpt"))
    recipe = {"model_name_or_path": "Qwen/Qwen3-4B-Base", "finetuning_type": "full", "template": "qwen",
              "cutoff_len": 8192, "learning_rate": 2e-5, "num_train_epochs": 3.0, "per_device_train_batch_size": 1,
              "gradient_accumulation_steps": 16, "lr_scheduler_type": "cosine", "warmup_ratio": 0.05, "bf16": True,
              "disable_gradient_checkpointing": False, "flash_attn": "fa2", "save_steps": 200, "save_total_limit": 3,
              "dataset": "envsim_chat", "stage": "sft", "dataset_dir": "/data/export/sft", "output_dir": "/ckpt"}
    assert {k: full[k] for k in recipe} == recipe
    assert "lora_rank" not in full and "deepspeed" not in full and launch_env(1) == {}
    lora = sft_config(TrainSettings(finetuning_type="lora", lora_rank=8), Path("/d"), Path("/c"))
    assert lora["lora_rank"] == 8 and lora["lora_target"] == "all"
    multi = sft_config(TrainSettings(), Path("/d"), Path("/c"), gpus=2, deepspeed_path=Path("/c/ds_z3_config.json"))
    assert multi["deepspeed"] == "/c/ds_z3_config.json" and launch_env(2) == {"FORCE_TORCHRUN": "1", "NPROC_PER_NODE": "2"}
    passed = sft_config(TrainSettings(extra={"max_steps": 5, "bf16": False}), Path("/d"), Path("/c"))
    assert passed["max_steps"] == 5 and passed["bf16"] is False
    with pytest.raises(ValueError, match="full' or 'lora"):
        sft_config(TrainSettings(finetuning_type="qlora-ish"), Path("/d"), Path("/c"))
    with pytest.raises(ValueError, match=r"\['output_dir'\] are set by the pipeline"):
        sft_config(TrainSettings(extra={"output_dir": "/elsewhere"}), Path("/d"), Path("/c"))


def test_checkpoint_version_is_mixture_and_settings(tmp_path):
    base = checkpoint_version("sft-aaa", TrainSettings(), 2)
    assert base == checkpoint_version("sft-aaa", TrainSettings(), 2) and base.startswith("ckpt-")
    assert len({base, checkpoint_version("sft-bbb", TrainSettings(), 2), checkpoint_version("sft-aaa", TrainSettings(), 1),
                checkpoint_version("sft-aaa", TrainSettings(learning_rate=1e-5), 2),
                checkpoint_version("sft-aaa", TrainSettings(extra={"max_steps": 3}), 2)}) == 5
    cfg = sft_config(TrainSettings(), tmp_path, tmp_path / "out", gpus=2, deepspeed_path=tmp_path / "out" / "ds_z3_config.json")
    written = write_config(cfg, tmp_path / "out" / "train.yaml", zero3_path=tmp_path / "out" / "ds_z3_config.json")
    assert yaml.safe_load(written.read_text()) == cfg
    assert json.loads((tmp_path / "out" / "ds_z3_config.json").read_text())["zero_optimization"]["stage"] == 3


def test_run_report_reads_llamafactory_outputs(tmp_path):
    with pytest.raises(FileNotFoundError, match="did not finish training"):
        run_report(tmp_path)
    (tmp_path / "all_results.json").write_text(json.dumps({"train_loss": 2.5, "train_runtime": 3.0}))
    (tmp_path / "trainer_log.jsonl").write_text("\n".join(json.dumps(r) for r in [
        {"current_steps": 1, "total_steps": 2, "loss": 3.0, "lr": 1e-5, "epoch": 0.5, "total_tokens": 100, "throughput": 50.0},
        {"current_steps": 2, "total_steps": 2, "eval_loss": 2.9},
        {"current_steps": 2, "total_steps": 2, "loss": 2.0, "lr": 0.0, "epoch": 1.0, "total_tokens": 200, "throughput": 60.0}]))
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

    result = materialize([local_job], resources={"launcher": JobLauncherResource(workdir=str(tmp_path / "jobs"))},
                         raise_on_error=False)
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


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(")")[-1].split()[0] == "Z")


def test_local_job_killed_is_reported_and_its_process_group_ended(tmp_path):
    """The job's shell is killed (as by the OOM killer): reported as killed with its log tail, and what it
    started in the background (here a sleep that ignores SIGINT and SIGTERM) is ended with the group."""
    def kill_the_shell(workdir):
        os.kill(_wait_for(workdir / "shell.pid"), signal.SIGKILL)

    # the job runs in the repository ($OLDPWD: its job directory)
    script = 'echo started\n(trap "" INT TERM; exec sleep 120) & echo $! > "$OLDPWD/child.pid"\necho $$ > "$OLDPWD/shell.pid"\nwait\n'
    ok, failed, _, workdir = _local_job(tmp_path, script, during=kill_the_shell)
    assert not ok and failed.state == "CANCELLED" and "killed by signal 9 (SIGKILL)" in str(failed)
    assert "started" in failed.log_tail
    child = int((workdir / "child.pid").read_text())
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child), "the job's background process survived the failed job"


_TERMINATED = """
import os, signal, sys, threading, time
from pathlib import Path
from dagster import AssetExecutionContext, MaterializeResult, asset, materialize
from resources import JobLauncherResource

out = Path(sys.argv[1])

@asset
def job(context: AssetExecutionContext, launcher: JobLauncherResource) -> MaterializeResult:
    launcher.run_with_pipes(context, "job", f'(trap "" INT TERM; exec sleep 120) & echo $! > {out}/child.pid\\necho started\\nsleep 100\\n', {})
    return MaterializeResult()

def interrupt():  # what terminating the run does to the step's process
    while not (out / "child.pid").exists():
        time.sleep(0.05)
    time.sleep(0.3)
    os.kill(os.getpid(), signal.SIGINT)

threading.Thread(target=interrupt, daemon=True).start()
result = materialize([job], resources={"launcher": JobLauncherResource(workdir=str(out / "jobs"))}, raise_on_error=False)
print("success" if result.success else "failed")
"""


def test_local_job_of_a_terminated_run_is_ended_with_its_process_group(tmp_path):
    """The run is terminated (SIGINT in the step's process): Dagster's client forwards SIGINT to the job, and
    what ignores it (a background process trapping INT and TERM) is killed with the job's process group."""
    out = subprocess.run([sys.executable, "-c", _TERMINATED, str(tmp_path)], cwd=Path(__file__).resolve().parents[1],
                         capture_output=True, text=True, timeout=120)
    assert out.stdout.strip().endswith("failed"), out.stdout[-2000:] + out.stderr[-3000:]
    assert "[pipes] execution interrupted, sending SIGINT to subprocess" in out.stderr
    child = int((tmp_path / "child.pid").read_text())
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child), "the terminated job's background process survived"


def test_local_job_time_limit_ends_the_group(tmp_path):
    start = time.monotonic()
    ok, failed, _, _ = _local_job(tmp_path, "echo waiting; sleep 30\n", timeout_s=1)
    assert not ok and failed.state == "TIMEOUT" and "exceeded its time limit of 1s" in str(failed)
    assert "waiting" in failed.log_tail and time.monotonic() - start < 20


def _job_resources(layout, launcher):
    from resources import DataStoreResource

    return {"store": DataStoreResource(data_root=str(layout.root)), "launcher": launcher,
            "duckdb": DuckDBResource(database=str(layout.root / "jobs.duckdb"))}


def test_eval_job_reports_through_pipes_and_lands_in_duckdb(split_layout):
    from assets.training import simulator_eval_job
    from resources import JobLauncherResource

    launcher = JobLauncherResource(backend="local", workdir=str(split_layout.root / "jobs"))
    result = materialize([simulator_eval_job], resources=_job_resources(split_layout, launcher))
    assert result.success
    meta = result.get_asset_materialization_events()[0].event_specific_data.materialization.metadata
    assert "oracle@" in meta["summary"].value and "no-change" in meta["cm_by_group_from_job"].value
    con = duckdb.connect(str(split_layout.root / "jobs.duckdb"), read_only=True)
    assert dict(con.execute("SELECT simulator, cm FROM eval_runs").fetchall())["oracle"] == 100.0


def test_training_job_fails_before_submission_without_llamafactory(split_layout):
    from assets.training import sft_training
    from resources import JobLauncherResource

    # the main environment's Python has no LLaMA-Factory next to it
    launcher = JobLauncherResource(backend="local", workdir=str(split_layout.root / "jobs"), llamafactory_python=sys.executable)
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
        checkpoints.publish(staging, root / "checkpoints" / version, {
            "checkpoint_version": version, "mixture_version": "sft-1", "settings": settings, "gpus": 1,
            "metrics": {"train_loss": loss}})
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
    assert con.execute("SELECT checkpoint_version, mixture_version, train_loss FROM sft_checkpoints ORDER BY 1").fetchall() == [
        ("ckpt-aaa", "sft-1", 1.5), ("ckpt-bbb", "sft-1", 1.0)]
    checkpoints.record_eval_runs(con, [{"run_id": "ckpt-bbb@bench-1", "simulator": "ckpt-bbb", "split_version": "bench-1",
                                        "served_model": "ckpt-bbb", "checkpoint_version": "ckpt-bbb", "template": "qwen"}])
    assert con.execute("SELECT run_id, checkpoint_version, template FROM eval_job_runs").fetchall() == [
        ("ckpt-bbb@bench-1", "ckpt-bbb", "qwen")]


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
    assert checkpoints.default_served_name(ckpt, "ckpt-0123456789ab", {"checkpoint_version": "ckpt-0123456789ab"}) == "ckpt-0123456789ab"
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
from tests.fake_openai import FakeOpenAI
checkpoint = Path(yaml.safe_load(Path(sys.argv[2]).read_text())["model_name_or_path"])
known = (checkpoint / "answers.json").exists()
answers = json.loads((checkpoint / "answers.json").read_text()) if known else {{}}
with FakeOpenAI(answers, "correct" if known else "wrong", port=int(os.environ["API_PORT"]), models=(os.environ["API_MODEL_NAME"],)):
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
    cli.write_text(FAKE_LLAMAFACTORY_CLI.format(python=sys.executable, repo=str(Path(__file__).resolve().parent.parent)))
    cli.chmod(0o755)
    _, samples = load_samples(split_layout, None, max_samples=4)
    one, two = tmp_path / "one" / "final", tmp_path / "two" / "final"
    for ckpt, weights in ((one, b"weights of the first run"), (two, b"weights of the second run")):
        ckpt.mkdir(parents=True)
        (ckpt / "model.safetensors").write_bytes(weights)
    (one / "answers.json").write_text(json.dumps({messages(s)[1]["content"]: answer(s) for s in samples}))
    launcher = JobLauncherResource(backend="local", workdir=str(split_layout.root / "jobs"), llamafactory_python=str(env / "python"))
    resources = _job_resources(split_layout, launcher)

    def evaluate(ckpt):
        serve = {"checkpoint": str(ckpt), "template": "qwen", "backend": "huggingface", "served_model_name": "sim",
                 "ready_timeout_s": 60, "max_retries": 0}
        result = materialize([simulator_eval_job], resources=resources, run_config={"ops": {"simulator_eval_job": {
            "config": {"serve": serve, "simulators": [], "max_samples": 4}}}})
        assert result.success
        return result.get_asset_materialization_events()[0].event_specific_data.materialization.metadata

    first, second = evaluate(one), evaluate(two)
    with duckdb.connect(str(split_layout.root / "jobs.duckdb"), read_only=True) as con:
        # 4 answers of each checkpoint; only the first one's are right (not its scores recorded for the second)
        assert con.execute("SELECT count(*), sum(fm::INT) FROM eval_results WHERE simulator = 'sim'").fetchone() == (8, 4)
    wid_one, wid_two = (checkpoints.weights_id(c, None) for c in (one, two))
    assert wid_one != wid_two and wid_two.startswith("sha256-")
    assert (first["served_model"].value, first["weights_id"].value, first["scored"].value, first["resumed"].value) == ("sim", wid_one, 4, 0)
    assert (second["served_model"].value, second["weights_id"].value, second["scored"].value, second["resumed"].value) == ("sim", wid_two, 4, 0)
    con = duckdb.connect(str(split_layout.root / "jobs.duckdb"), read_only=True)
    try:
        scores = {r[1]: r for r in con.execute("SELECT run_id, weights_id, count(*), sum(cm::INT), sum(fm::INT) FROM eval_results "
                                               "WHERE simulator = 'sim' GROUP BY ALL").fetchall()}
        version = first["split_version"].value
        assert scores == {wid_one: (f"sim+{wid_one}@{version}", wid_one, 4, 4, 4), wid_two: (f"sim+{wid_two}@{version}", wid_two, 4, 0, 0)}
        lineage = con.execute("SELECT weights_id, served_model, checkpoint_path FROM eval_job_runs WHERE simulator = 'sim'").fetchall()
        assert sorted(lineage) == sorted([(wid_one, "sim", str(one)), (wid_two, "sim", str(two))])
    finally:
        con.close()
    again = evaluate(two)  # the same weights again: nothing is asked
    assert (again["scored"].value, again["resumed"].value) == (0, 4)


def test_launcher_finds_the_llamafactory_environment(tmp_path, monkeypatch):
    from resources import JobLauncherResource

    env = tmp_path / "venv" / "bin"
    env.mkdir(parents=True)
    (env / "python").write_text("")
    with pytest.raises(FileNotFoundError, match="llamafactory-cli not found next to"):
        JobLauncherResource(llamafactory_python=str(env / "python")).llamafactory()
    (env / "llamafactory-cli").write_text(f"#!{env / 'python'}\n")
    assert JobLauncherResource(llamafactory_python=str(env / "python")).llamafactory() == (str(env / "python"), str(env / "llamafactory-cli"))
    monkeypatch.setenv("ENVSIM_LLAMAFACTORY_PYTHON", str(env / "python"))
    assert JobLauncherResource().llamafactory()[1] == str(env / "llamafactory-cli")
