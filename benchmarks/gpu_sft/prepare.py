"""Prepare the GPU SFT experiment (docs/evaluation.md "Measured on a GPU") from the current data
root, into one folder that travels to the GPU node:

* ``bench.jsonl``: every sample of the current benchmark version with its simulator prompt (the ``envsim``
  template of :func:`pipeline.core.protocol.messages`, exactly what ``simulator_eval`` sends);
* ``mixtures/balance2`` and ``mixtures/uniform``: LLaMA-Factory datasets of the current Balance2 mixture and
  of a uniform random mixture of the same size, seed and decontamination (``build_mixture(composition=
  "uniform")``), both exported by the project's own export;
* ``train-<mixture>.yaml``: the LLaMA-Factory configs written by :func:`pipeline.training.llamafactory.sft_config`
  with the same settings for both mixtures;
* ``plan.json``: versions and settings, read back by ``score.py``.

  .venv/bin/python benchmarks/gpu_sft/prepare.py OUT_DIR [--epochs 2] [--lr 1e-4]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from pathlib import Path

from pipeline.core.protocol import messages
from pipeline.evaluate.samples import load_samples
from pipeline.export.hf_layout import export_split
from pipeline.select.selection import build_mixture
from pipeline.store.layout import DataLayout
from pipeline.store.versions import MIXTURE, SplitStore
from pipeline.training.llamafactory import TrainSettings, sft_config, write_config


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("--data-root", default=os.environ.get("ENVSIM_DATA_ROOT", "data"))
    ap.add_argument("--remote", default="gpu_exp", help="the folder's path on the GPU node, relative to the repo root")
    ap.add_argument("--epochs", type=float, default=2.0)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--per-device-batch", type=int, default=16)
    ap.add_argument("--global-batch", type=int, default=32)
    a = ap.parse_args()
    layout = DataLayout.at(a.data_root)
    out: Path = a.out
    out.mkdir(parents=True, exist_ok=True)

    version, samples = load_samples(layout)
    with (out / "bench.jsonl").open("w") as fh:
        for s in samples:
            fh.write(
                json.dumps({"step_id": s["step_id"], "stratum": s["stratum"], "messages": messages(s, "envsim")}) + "\n"
            )

    store = SplitStore(layout, MIXTURE)
    balance2 = store.current()
    spec = store.manifest(balance2)["spec"]
    uniform = build_mixture(
        layout,
        sizes=spec["sizes"],
        seed=spec["seed"],
        decontaminate=spec["decontaminate"],
        benchmark_version=spec["benchmark"],
        make_current=False,
        composition="uniform",
    )
    mixtures = {"balance2": balance2, "uniform": uniform.version}
    settings = TrainSettings(
        model_name_or_path=f"{a.remote}/base_hf",
        template="smollm2",
        dataset="envsim_chat",
        cutoff_len=8192,
        learning_rate=a.lr,
        num_train_epochs=a.epochs,
        per_device_train_batch_size=a.per_device_batch,
        gradient_accumulation_steps=a.global_batch // a.per_device_batch,
        bf16=True,
        gradient_checkpointing=False,
        flash_attn="sdpa",
        save_steps=100000,
        logging_steps=5,
        preprocessing_num_workers=16,
        extra={"seed": 42, "data_seed": 42, "dataloader_num_workers": 4},
    )
    for name, mix_version in mixtures.items():
        export_dir = out / "mixtures" / name
        if export_dir.exists():
            shutil.rmtree(export_dir)
        export_split(layout, MIXTURE, mix_version, export_dir)
        for extra in ("data", "sft/alpaca"):  # only the chat records travel
            shutil.rmtree(export_dir / extra, ignore_errors=True)
        cfg = sft_config(settings, Path(f"{a.remote}/mixtures/{name}"), Path(f"{a.remote}/ckpt/{name}"))
        write_config(cfg, out / f"train-{name}.yaml")
    plan = {
        "benchmark_version": version,
        "samples": len(samples),
        "mixtures": mixtures,
        "uniform_strata": uniform.strata,
        "settings": {
            k: v
            for k, v in sft_config(settings, Path("."), Path(".")).items()
            if k not in ("dataset_dir", "output_dir")
        },
    }
    (out / "plan.json").write_text(json.dumps(plan, indent=2, default=str))
    print(json.dumps({k: plan[k] for k in ("benchmark_version", "samples", "mixtures")}, indent=2))


if __name__ == "__main__":
    main()
