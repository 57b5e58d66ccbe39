"""A stand-in LLaMA-Factory job environment for the fast training tests (the real one, .venv-train, is
exercised by the slow tests/e2e/test_llamafactory_e2e.py).

:func:`make_env` builds a directory holding ``bin/python`` (this interpreter with stub ``llamafactory`` and
``torch`` packages, and distribution metadata giving their versions, on its path) and ``bin/llamafactory-cli``.
The pipeline's own ``lf_check.py`` runs there unchanged: it reads the DeepSpeed file the config names and
calls the stub ``get_train_args``, which rejects unknown keys the way LLaMA-Factory's parser does.
``llamafactory-cli train CONFIG [key=value ...]`` (this file run as a script) trains like the
Hugging Face Trainer as far as the pipeline can see: it resumes from ``resume_from_checkpoint``, logs
``trainer_log.jsonl``, writes ``checkpoint-N`` every ``save_steps`` (``trainer_state.json`` last, as the
Trainer does) and keeps ``save_total_limit`` of them, then ``all_results.json`` and the weights. Every call is
appended to ``<output_dir>/fake_lf_calls.jsonl`` (arguments, resume point, the launch environment).
``FAKE_LF_STOP_AT=N`` ends the first call that reaches step N with exit 143, as a preempted or
timed-out job ends. ``llamafactory-cli api CONFIG`` is a server that never gets ready (:func:`_api`).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import yaml

#: the versions the stub environment reports (``importlib.metadata``)
VERSIONS = {
    "llamafactory": "0.9.5",
    "transformers": "5.6.0",
    "torch": "2.13.0",
    "accelerate": "1.10.0",
    "deepspeed": "0.17.6",
}

#: the environment of the launch that the calls record
LAUNCH_ENV = (
    "FORCE_TORCHRUN",
    "NPROC_PER_NODE",
    "NNODES",
    "NODE_RANK",
    "MASTER_ADDR",
    "MASTER_PORT",
    "HF_HOME",
    "HF_HUB_OFFLINE",
    "TRANSFORMERS_OFFLINE",
    "PYTHONPATH",
)

_HPARAMS = """
KNOWN = {known!r}


def get_train_args(args):
    unknown = sorted(set(args) - KNOWN)
    if unknown:
        raise ValueError(f"Some keys are not used by the HfArgumentParser: {{unknown}}")
    return args
"""

#: the training arguments the stub parser knows (what the pipeline writes, and a few more)
KNOWN = {
    "model_name_or_path",
    "model_revision",
    "trust_remote_code",
    "stage",
    "do_train",
    "finetuning_type",
    "dataset",
    "dataset_dir",
    "template",
    "cutoff_len",
    "overwrite_cache",
    "preprocessing_num_workers",
    "output_dir",
    "logging_steps",
    "save_steps",
    "save_total_limit",
    "save_only_model",
    "plot_loss",
    "report_to",
    "logging_dir",
    "run_name",
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "learning_rate",
    "num_train_epochs",
    "lr_scheduler_type",
    "warmup_ratio",
    "bf16",
    "flash_attn",
    "disable_gradient_checkpointing",
    "include_num_input_tokens_seen",
    "ddp_timeout",
    "lora_rank",
    "lora_alpha",
    "lora_target",
    "deepspeed",
    "seed",
    "data_seed",
    "max_steps",
    "max_samples",
    "dataloader_num_workers",
    "resume_from_checkpoint",
}


def make_env(root: Path, versions: dict[str, str] | None = None) -> Path:
    """The stand-in environment under ``root``; returns its ``bin/python``."""
    site = root / "site"
    for package, files in {
        "llamafactory": {
            "__init__.py": "",
            "hparams/__init__.py": _HPARAMS.format(known=KNOWN),
            "extras/__init__.py": "",
            "extras/misc.py": "def check_version(requirement, mandatory=False):\n    return None\n",
        },
        "torch": {"__init__.py": "class cuda:\n    @staticmethod\n    def is_available():\n        return False\n"},
    }.items():
        for name, text in files.items():
            (site / package / name).parent.mkdir(parents=True, exist_ok=True)
            (site / package / name).write_text(text)
    for dist, version in {**VERSIONS, **(versions or {})}.items():
        info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
        info.mkdir(parents=True, exist_ok=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    bin_dir = root / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    python = bin_dir / "python"
    python.write_text(f'#!/bin/sh\nPYTHONPATH={site}${{PYTHONPATH:+:$PYTHONPATH}} exec {sys.executable} "$@"\n')
    cli = bin_dir / "llamafactory-cli"
    cli.write_text(f'#!/bin/sh\nexec {sys.executable} {Path(__file__).resolve()} "$@"\n')
    for path in (python, cli):
        path.chmod(0o755)
    return python


def calls(output_dir: Path) -> list[dict]:
    """The recorded ``llamafactory-cli train`` calls that trained into ``output_dir``."""
    path = output_dir / "fake_lf_calls.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _train(config: Path, overrides: list[str]) -> int:
    cfg = yaml.safe_load(config.read_text())
    for item in overrides:
        key, _, value = item.partition("=")
        cfg[key] = yaml.safe_load(value)
    out = Path(cfg["output_dir"])
    info = json.loads((Path(cfg["dataset_dir"]) / "dataset_info.json").read_text())
    if cfg["dataset"] not in info:
        print(f"ValueError: Undefined dataset {cfg['dataset']} in dataset_info.json.", file=sys.stderr)
        return 1
    resume = cfg.get("resume_from_checkpoint")
    start = json.loads((Path(resume) / "trainer_state.json").read_text())["global_step"] if resume else 0
    with (out / "fake_lf_calls.jsonl").open("a") as fh:
        fh.write(
            json.dumps(
                {
                    "argv": [str(config), *overrides],
                    "resume": resume,
                    "start": start,
                    "env": {k: os.environ.get(k) for k in LAUNCH_ENV},
                    "config": cfg,
                }
            )
            + "\n"
        )
    if os.environ.get("NODE_RANK", "0") != "0":  # under torchrun, the first node's rank 0 writes the outputs
        return 0
    steps, every = int(cfg["max_steps"]), int(cfg["save_steps"])
    stop = int(os.environ.get("FAKE_LF_STOP_AT", "0"))
    history = []
    for step in range(start + 1, steps + 1):
        entry = {
            "current_steps": step,
            "total_steps": steps,
            "loss": round(4.0 / step, 4),
            "lr": 1e-5,
            "epoch": step / steps,
            "total_tokens": 100 * step,
            "throughput": 1000.0,
        }
        history.append({"step": step, "loss": entry["loss"], "epoch": entry["epoch"]})
        with (out / "trainer_log.jsonl").open("a") as fh:
            fh.write(json.dumps(entry) + "\n")
        if step % every == 0 or step == steps:
            ckpt = out / f"checkpoint-{step}"
            ckpt.mkdir(exist_ok=True)
            (ckpt / "model.safetensors").write_text(f"weights at step {step}")
            if not cfg.get("save_only_model"):
                (ckpt / "optimizer.pt").write_text("optimizer state")
            (ckpt / "trainer_state.json").write_text(
                json.dumps({"global_step": step, "epoch": step / steps, "log_history": history})
            )
            kept = sorted((p for p in out.glob("checkpoint-*")), key=lambda p: int(p.name.split("-")[1]))
            for old in kept[: -int(cfg["save_total_limit"])]:
                for f in old.iterdir():
                    f.unlink()
                old.rmdir()
        marker = out / ".fake-lf-stopped"
        if step == stop and not marker.exists():
            marker.write_text("")
            print(f"stopped at step {step}", flush=True)
            return 143
    (out / "model.safetensors").write_text("final weights")
    (out / "all_results.json").write_text(
        json.dumps(
            {
                "train_loss": history[-1]["loss"] if history else None,
                "train_runtime": 1.0,
                "num_input_tokens_seen": 100 * steps,
            }
        )
    )
    return 0


def _api(config: Path) -> int:
    """``llamafactory-cli api CONFIG`` as a server still loading its model: it starts a helper process of its own
    (as a real server's workers), records both process ids in ``FAKE_LF_API_PIDS`` (a file), and never answers."""
    import subprocess
    import time

    helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    Path(os.environ["FAKE_LF_API_PIDS"]).write_text(f"{os.getpid()} {helper.pid}")
    while True:
        time.sleep(1)


if __name__ == "__main__":
    command, *rest = sys.argv[1:]
    if command == "api":
        sys.exit(_api(Path(rest[0])))
    if command != "train":
        sys.exit(f"the stand-in llamafactory-cli knows only `train` and `api`, not {command!r}")
    sys.exit(_train(Path(rest[0]), rest[1:]))
