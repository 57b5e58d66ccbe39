"""``./forge bench-model --checkpoint <Hub id>`` (issue 32, item 7): a model in the local Hugging Face cache is
served from its snapshot, offline; one that is not there is one line saying how to provide the weights, with no
traceback — checked before the serving environment is installed (tests/e2e/test_cli_errors.py)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.training.bench_model import ModelUnavailable, check_model, find_weights, hub_snapshot

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
        [sys.executable, "-m", "pipeline", "bench-model", "--checkpoint", "Qwen/Qwen2.5-0.5B-Instruct"],
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
