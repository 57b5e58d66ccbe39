"""End to end on CPU with real LLaMA-Factory and real torch (slow; run by .ci/run through ./forge test):
a tiny random-initialised Qwen3 with a tokenizer trained offline on the exported records, `sft_training`
through the local launcher for a few steps, then `simulator_eval_job` serving that checkpoint with
`llamafactory-cli api` and landing its per-sample scores in DuckDB. The job environment (.venv-train) is
created by `./forge train-env` (cached by a stamp)."""

import json
import shutil
import subprocess
from pathlib import Path

import duckdb
import pytest
from dagster import materialize

from pipeline.export.hf_layout import MARKER
from pipeline.training.serve import ServerNotReady, ServeSpec, serve
from tests.support.parallel import forge_environment, one_at_a_time
from tests.training.test_jobs import _job_resources, split_layout  # module fixture

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow

# what CPU needs instead of the GPU recipe (bf16, flash-attn 2), and a few steps on a tiny model
CPU_TRAIN = {
    "bf16": False,
    "flash_attn": "sdpa",
    "cutoff_len": 1024,
    "per_device_train_batch_size": 2,
    "global_batch_size": 2,
    "learning_rate": 1e-3,
    "logging_steps": 1,
    "preprocessing_num_workers": 1,
    "gpus": 0,
    "extra_args": {"max_steps": 4, "max_samples": 32, "dataloader_num_workers": 0},
}


@pytest.fixture(scope="module")
def train_python(tmp_path_factory):
    """.venv-train, the LLaMA-Factory job environment (requirements-train.txt), created once by ./forge."""
    return forge_environment(tmp_path_factory, "train-env", ".venv-train", timeout=1800)


@pytest.fixture(scope="module")
def tiny_model(train_python, split_layout, tmp_path_factory):
    out = tmp_path_factory.mktemp("tiny-qwen3")
    subprocess.run(
        [
            train_python,
            str(ROOT / "tests" / "support" / "tiny_qwen3.py"),
            str(split_layout.export_current("sft_mixture")),
            str(out),
        ],
        check=True,
        capture_output=True,
        timeout=600,
    )
    assert (out / "config.json").exists() and (out / "tokenizer.json").exists()
    return out


def _launcher(layout, train_python):
    from resources import JobLauncherResource

    return JobLauncherResource(backend="local", workdir=str(layout.root / "jobs"), llamafactory_python=train_python)


def _failure(result) -> str:
    failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    error = failure.event_specific_data.error
    return "\n".join(filter(None, [error.message, error.cause.message if error.cause else None]))


def _meta(result, key=None):
    return result.get_asset_materialization_events()[0].event_specific_data.materialization.metadata


def test_wrong_llamafactory_argument_fails_before_submission(split_layout, train_python, tiny_model):
    from assets.training import sft_training

    config = {**CPU_TRAIN, "model_name_or_path": str(tiny_model), "extra_args": {"max_steps": 2, "learning_rte": 0.1}}
    result = materialize(
        [sft_training],
        resources=_job_resources(split_layout, _launcher(split_layout, train_python)),
        run_config={"ops": {"sft_training": {"config": config}}},
        raise_on_error=False,
    )
    assert not result.success
    message = _failure(result)
    assert "LLaMA-Factory rejected the training arguments" in message
    assert "Some keys are not used by the HfArgumentParser: ['learning_rte']" in message  # LLaMA-Factory's own parser
    assert not list((split_layout.root / "jobs").glob("sft-train-*")), "nothing may be submitted"


def test_train_serve_and_score_on_cpu(split_layout, train_python, tiny_model):
    from assets.training import sft_training, simulator_eval_job

    resources = _job_resources(split_layout, _launcher(split_layout, train_python))
    config = {**CPU_TRAIN, "model_name_or_path": str(tiny_model)}
    trained = materialize([sft_training], resources=resources, run_config={"ops": {"sft_training": {"config": config}}})
    assert trained.success
    meta = _meta(trained)
    mixture = json.loads((split_layout.export_current("sft_mixture") / MARKER).read_text())["version"]
    version = meta["checkpoint_version"].value
    assert meta["mixture_version"].value == mixture and version.startswith("ckpt-")
    checkpoint = split_layout.root / "checkpoints" / version
    assert Path(meta["checkpoint"].value) == checkpoint.resolve()
    assert (checkpoint / "model.safetensors").exists() and (checkpoint / "trainer_log.jsonl").exists()
    assert (split_layout.root / "checkpoints" / "LATEST").read_text().strip() == version
    manifest = json.loads((checkpoint / "envsim_checkpoint.json").read_text())
    assert manifest["mixture_version"] == mixture and manifest["settings"]["template"] == "qwen"
    assert (
        manifest["metrics"]["train_loss"] > 0
        and meta["metrics"].value["train_loss"] == manifest["metrics"]["train_loss"]
    )
    assert (
        meta["loss_curve"].value.startswith("![training loss](data:image/png;base64,") and meta["final_loss"].value > 0
    )
    assert not list(checkpoint.parent.glob(".ckpt-*")), "the staging directory is published, not left behind"

    run_config = {
        "ops": {
            "simulator_eval_job": {
                "config": {
                    "simulators": [],
                    "max_samples": 6,
                    "serve": {"checkpoint": "latest", "max_tokens": 24, "ready_timeout_s": 300, "concurrency": 2},
                }
            }
        }
    }
    evaluated = materialize([simulator_eval_job], resources=resources, run_config=run_config)
    assert evaluated.success
    meta = _meta(evaluated)
    assert meta["served_model"].value == version and meta["template"].value == "qwen"
    assert meta["backend"].value == "huggingface"  # vLLM is not installed in the CPU job environment
    assert meta["checkpoint_version"].value == version and meta["mixture_version"].value == mixture
    con = duckdb.connect(str(split_layout.root / "jobs.duckdb"), read_only=True)
    split = meta["split_version"].value
    run = f"{version}@{split}"
    rows = con.execute(
        "SELECT count(*), count(*) FILTER (NOT parse_ok), count(*) FILTER (request_error IS NOT NULL), "
        "count(*) FILTER (completion_tokens > 0) FROM eval_results WHERE run_id = ?",
        [run],
    ).fetchone()
    samples, parse_failures, request_errors, answered = rows
    assert samples == 6 and request_errors == 0 and answered == 6  # every sample went through the served model
    assert parse_failures == meta["parse_failures"].value and parse_failures > 0  # an untrained model's text is no JSON
    lineage = con.execute(
        "SELECT served_model, checkpoint_version, template, backend, split_version FROM eval_job_runs WHERE run_id = ?",
        [run],
    ).fetchone()
    assert lineage == (version, version, "qwen", "huggingface", split)
    assert con.execute(
        "SELECT mixture_version FROM sft_checkpoints WHERE checkpoint_version = ?", [version]
    ).fetchone() == (mixture,)
    scores = con.execute(
        "SELECT mixture_version, samples, parse_fail_pct FROM checkpoint_scores WHERE run_id = ?", [run]
    ).fetchone()
    assert scores == (mixture, 6, round(100 * parse_failures / 6, 1))


def test_server_that_never_becomes_ready_fails_with_its_log_tail(split_layout, train_python, tiny_model, tmp_path):
    from assets.training import simulator_eval_job

    broken = tmp_path / "not-a-model"  # the tokenizer loads, the model config names no architecture transformers knows
    broken.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tiny_model / name, broken / name)
    (broken / "config.json").write_text(json.dumps({"model_type": "no_such_architecture"}))
    run_config = {
        "ops": {
            "simulator_eval_job": {
                "config": {
                    "simulators": [],
                    "max_samples": 2,
                    "serve": {"checkpoint": str(broken), "template": "qwen", "ready_timeout_s": 300},
                }
            }
        }
    }
    resources = _job_resources(split_layout, _launcher(split_layout, train_python))
    # no weight file: the job cannot tell which weights it would score (results are cached by them) and says so
    result = materialize([simulator_eval_job], resources=resources, run_config=run_config, raise_on_error=False)
    assert not result.success and "holds no weight file" in _failure(result)
    (broken / "model.safetensors").write_bytes(b"not weights")
    result = materialize([simulator_eval_job], resources=resources, run_config=run_config, raise_on_error=False)
    assert not result.success
    message = _failure(result)
    assert "llamafactory-cli api exited with code" in message and "--- server log tail ---" in message
    assert "no_such_architecture" in message  # the server's own error, from its log

    # a server still loading when the bounded wait ends is stopped and reported with its log tail
    cli = str(Path(train_python).parent / "llamafactory-cli")
    spec = ServeSpec(
        model_name_or_path=str(broken),
        template="qwen",
        served_name="x",
        backend="huggingface",
        ready_timeout_s=1,
        llamafactory_cli=cli,
        llamafactory_python=train_python,
    )
    with pytest.raises(ServerNotReady, match=r"did not become ready within 1s[\s\S]*--- server log tail ---"):
        with serve(spec, tmp_path / "serve", log=lambda _m: None):
            pass
