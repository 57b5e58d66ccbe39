"""``./forge bench-model --checkpoint <Hub id>`` (issue 32, item 7): a model in the local Hugging Face cache is
served from its snapshot, offline; one that is not there is one line saying how to provide the weights, with no
traceback — checked before the serving environment is installed (tests/e2e/test_cli_errors.py)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.evaluate.simulators import simulator_spec
from pipeline.store.layout import DataLayout
from pipeline.training.bench_model import (
    NOT_SERVED,
    ModelUnavailable,
    all_scored,
    check_model,
    find_weights,
    hub_snapshot,
)

ROOT = Path(__file__).resolve().parents[2]


def _cached_model(cache: Path, repo_id: str) -> Path:
    """A model as huggingface_hub's cache holds it: refs/main naming a snapshot of config.json and weights."""
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    commit = "0123456789abcdef0123456789abcdef01234567"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text('{"model_type": "qwen2"}')
    (snapshot / "model.safetensors").write_bytes(b"\0" * 16)
    return snapshot


def test_a_hub_id_in_the_cache_is_its_snapshot(tmp_path):
    snapshot = _cached_model(tmp_path / "hub", "acme/tiny-instruct")
    assert hub_snapshot("acme/tiny-instruct", tmp_path / "hub") == snapshot
    path, manifest = find_weights("acme/tiny-instruct", tmp_path / "data", tmp_path / "hub")
    assert path == snapshot and manifest is None
    check_model("acme/tiny-instruct", tmp_path / "data", "qwen", tmp_path / "hub")
    with pytest.raises(ModelUnavailable, match="pass --template"):  # not ours: its chat template is not known
        check_model("acme/tiny-instruct", tmp_path / "data", None, tmp_path / "hub")


def test_a_hub_id_not_in_the_cache_says_how_to_provide_it(tmp_path):
    (tmp_path / "hub").mkdir()
    with pytest.raises(ModelUnavailable) as err:
        check_model("Qwen/Qwen2.5-0.5B-Instruct", tmp_path / "data", "qwen", tmp_path / "hub")
    message = str(err.value)
    assert (
        "\n" not in message and "hf download Qwen/Qwen2.5-0.5B-Instruct" in message and str(tmp_path / "hub") in message
    )
    with pytest.raises(ModelUnavailable, match="ckpt-0abc"):
        check_model("ckpt-0abc/step-3", tmp_path / "data", None, tmp_path / "hub")  # a checkpoint step, not a Hub id


def test_the_command_says_it_in_one_line_without_a_traceback(tmp_path):
    (tmp_path / "hub").mkdir()
    env = {
        **os.environ,
        "HF_HUB_CACHE": str(tmp_path / "hub"),
        "HF_HUB_OFFLINE": "1",
        "ENVSIM_DATA_ROOT": str(tmp_path / "data"),
    }
    proc = subprocess.run(
        [sys.executable, "-m", "cli", "bench-model", "--checkpoint", "Qwen/Qwen2.5-0.5B-Instruct"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr[-3000:]
    assert (
        lines[0].startswith("./forge bench-model: --checkpoint Qwen/Qwen2.5-0.5B-Instruct")
        and "Traceback" not in proc.stderr
    )


def test_a_measurement_is_all_scored_only_when_these_weights_answered_every_sample(tmp_path):
    """What lets a re-run of bench-model on the same weights start no server (tests/e2e/test_real_model.py)."""
    layout = DataLayout.at(tmp_path / "data")

    def spec(wid):
        return simulator_spec(name="m", kind="openai", model="m", base_url=NOT_SERVED, api_key_env="", weights_id=wid)

    scored = spec("sha256-aa")
    path = layout.eval_results("bench-x", scored.results_name)
    path.parent.mkdir(parents=True)
    rows = [{"step_id": s, "request_error": None, "prompt": scored.prompt, "weights_id": "sha256-aa"} for s in "ab"]
    rows.append({"step_id": "c", "request_error": "timeout", "prompt": scored.prompt, "weights_id": "sha256-aa"})
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    samples = [{"step_id": s} for s in "ab"]
    assert all_scored(layout, "bench-x", samples, scored)
    assert not all_scored(layout, "bench-x", [*samples, {"step_id": "c"}], scored)  # a failed request is asked again
    assert not all_scored(layout, "bench-y", samples, scored)  # another benchmark version
    assert not all_scored(layout, "bench-x", samples, spec("sha256-bb"))  # other weights


def test_check_says_what_it_found_in_one_line(tmp_path, monkeypatch, capsys):
    """``./forge bench-model --check`` on success: one line naming the weights and the chat template (issue 43,
    item 7), exit 0; for an embedded model, that it is embedded."""
    from cli.entry import main

    snapshot = _cached_model(tmp_path / "hub", "acme/tiny-instruct")
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))  # read from the environment at import
    monkeypatch.setenv("ENVSIM_DATA_ROOT", str(tmp_path / "data"))
    argv = ["bench-model", "--check", "--checkpoint", "acme/tiny-instruct", "--template", "qwen"]
    assert main(argv) == 0
    assert capsys.readouterr().out == (
        f"./forge bench-model --check: acme/tiny-instruct: weights at {snapshot}, chat template qwen: ready to serve\n"
    )
    assert main(["bench-model", "--check"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert line == (
        "./forge bench-model --check: smollm2-135m-instruct is embedded (converted when first served): ready to serve"
    )
