"""A bounded CPU SFT run of the real model (docs/evaluation.md "Measured on CPU"): `sft_training` of
SmolLM2-135M-Instruct (by name, the embedded base model) on the exported Balance2 mixture through the local launcher —
fp32, a short cutoff, N steps — then `bench-model` on the checkpoint it published, served and scored the same way as the
base model (`./forge bench-model`), so the two rows compare.

  .venv/bin/python benchmarks/cpu_sft.py [--steps 16] [--cutoff 1024] [--per-cell 1] [--max-tokens 256]
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from dagster import materialize
from dagster_duckdb import DuckDBResource

from assets.training import sft_training
from pipeline.report.tables import md_table
from pipeline.store.layout import DataLayout
from pipeline.training.bench_model import bench_model
from pipeline.training.launchers import find_llamafactory
from resources import DataStoreResource, JobLauncherResource


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-root", default=os.environ.get("ENVSIM_DATA_ROOT", "data"))
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--cutoff", type=int, default=1024)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--per-cell", type=int, default=1)
    ap.add_argument("--max-tokens", type=int, default=256)
    a = ap.parse_args()
    layout = DataLayout.at(a.data_root)
    python, cli = find_llamafactory()
    config = {
        "model_name_or_path": "smollm2-135m-instruct",
        "bf16": False,
        "flash_attn": "sdpa",
        "cutoff_len": a.cutoff,
        "per_device_train_batch_size": a.batch,
        "global_batch_size": a.batch,
        "learning_rate": a.lr,
        "logging_steps": 1,
        "preprocessing_num_workers": 2,
        "gpus": 0,
        "gradient_checkpointing": False,
        "extra_args": {"max_steps": a.steps, "dataloader_num_workers": 0, "warmup_ratio": 0.0},
    }
    resources = {
        "store": DataStoreResource(data_root=str(layout.root)),
        "launcher": JobLauncherResource(backend="local", workdir=str(layout.root / "jobs"), llamafactory_python=python),
        "duckdb": DuckDBResource(database=str(layout.duckdb)),
    }
    result = materialize([sft_training], resources=resources, run_config={"ops": {"sft_training": {"config": config}}})
    meta = result.get_asset_materialization_events()[0].event_specific_data.materialization.metadata
    checkpoint = Path(meta["checkpoint"].value)
    losses = [json.loads(line) for line in (checkpoint / "trainer_log.jsonl").read_text().splitlines()]
    losses = [(r["current_steps"], round(r["loss"], 4)) for r in losses if "loss" in r]
    print(f"trained {meta['checkpoint_version'].value}: loss by step {losses}")
    bench = bench_model(
        layout.root, python, cli, meta["checkpoint_version"].value, per_cell=a.per_cell, max_tokens=a.max_tokens
    )
    print(f"{bench.run_id}: {bench.scored} scored, {bench.resumed} resumed in {bench.seconds:.0f}s")
    print(md_table(bench.cells, index=False))


if __name__ == "__main__":
    main()
