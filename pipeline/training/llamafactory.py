"""LLaMA-Factory SFT on the exported Balance2 mixture: the training config (the published EnvSimBench
recipe as defaults, full or LoRA, any further LLaMA-Factory argument passed through), its validation by
LLaMA-Factory's own argument parser in the job environment before submission, checkpoint versions
(mixture version × settings), the job script, and what a finished run left behind (metrics, loss curve).
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

from pipeline.core.fields import setting
#: DeepSpeed ZeRO-3 as in LLaMA-Factory's examples/deepspeed/ds_z3_config.json (used when gpus > 1)
ZERO3: dict[str, Any] = {
    "train_batch_size": "auto",
    "train_micro_batch_size_per_gpu": "auto",
    "gradient_accumulation_steps": "auto",
    "gradient_clipping": "auto",
    "zero_allow_untested_optimizer": True,
    "fp16": {"enabled": "auto", "loss_scale": 0, "loss_scale_window": 1000, "initial_scale_power": 16,
             "hysteresis": 2, "min_loss_scale": 1},
    "bf16": {"enabled": "auto"},
    "zero_optimization": {
        "stage": 3, "overlap_comm": False, "contiguous_gradients": True, "sub_group_size": 1e9,
        "reduce_bucket_size": "auto", "stage3_prefetch_bucket_size": "auto",
        "stage3_param_persistence_threshold": "auto", "stage3_max_live_parameters": 1e9,
        "stage3_max_reuse_distance": 1e9, "stage3_gather_16bit_weights_on_model_save": True,
    },
}

#: arguments the pipeline sets itself; ``extra`` may not override them
MANAGED = frozenset({"stage", "do_train", "dataset_dir", "output_dir", "finetuning_type", "deepspeed"})

#: the file written next to a finished checkpoint: its version and lineage
MANIFEST = "envsim_checkpoint.json"

CHECK_SCRIPT = Path(__file__).with_name("lf_check.py")
from pipeline.training.lf_check import MARK as CHECK_MARK  # noqa: E402  (stdlib-only module)


class InvalidTrainingArguments(ValueError):
    """LLaMA-Factory's own argument parser rejected the training config (raised before submission)."""


@dataclass(frozen=True)
class TrainSettings:
    """What a training run is made of; the defaults are the published EnvSimBench recipe for the 4B
    simulator (full SFT of Qwen3-4B-Base). ``extra`` holds any further LLaMA-Factory argument."""

    model_name_or_path: str = setting("Qwen/Qwen3-4B-Base", "Base model (Hub id or directory).")
    finetuning_type: Literal["full", "lora"] = setting("full", "Full fine-tuning or LoRA.")
    template: str = setting("qwen", "LLaMA-Factory chat template.")
    dataset: str = setting("envsim_chat", "envsim_chat or envsim_alpaca (the export's dataset_info.json).")
    cutoff_len: int = setting(8192, "Longest tokenized sample; longer ones are cut.")
    learning_rate: float = setting(2e-5, "Peak learning rate.")
    num_train_epochs: float = setting(3.0, "Epochs over the mixture.")
    per_device_train_batch_size: int = setting(1, "Samples per GPU per step.")
    gradient_accumulation_steps: int = setting(16, "Steps accumulated per optimizer update.")
    lr_scheduler_type: str = setting("cosine", "Learning-rate schedule.")
    warmup_ratio: float = setting(0.05, "Share of the steps spent warming up.")
    bf16: bool = setting(True, "Train in bfloat16.")
    gradient_checkpointing: bool = setting(True, "Recompute activations to save memory.")
    flash_attn: str = setting("fa2", "LLaMA-Factory's flash_attn: auto, disabled, sdpa, fa2.")
    save_steps: int = setting(200, "Save a checkpoint every this many steps.")
    save_total_limit: int = setting(3, "Checkpoints kept.")
    logging_steps: int = setting(10, "Log the loss every this many steps.")
    preprocessing_num_workers: int = setting(16, "Processes tokenizing the dataset.")
    lora_rank: int = setting(16, "LoRA rank (finetuning_type lora).")
    lora_alpha: int = setting(32, "LoRA alpha (finetuning_type lora).")
    lora_target: str = setting("all", "Modules LoRA adapts (finetuning_type lora).")
    deepspeed: str | None = setting(None, "A DeepSpeed config file; default: ZeRO-3 when gpus > 1.")
    extra: dict[str, Any] = setting(factory=dict, description="Any further LLaMA-Factory training argument (e.g. max_steps, "
                                    "max_samples); checked by LLaMA-Factory's own parser before submission.")


def sft_config(settings: TrainSettings, dataset_dir: Path, output_dir: Path, gpus: int = 1,
               deepspeed_path: Path | None = None) -> dict[str, Any]:
    """The LLaMA-Factory training config (the mapping its YAML file holds). With ``gpus > 1`` and no
    ``deepspeed`` file of its own, the run uses ZeRO-3 from ``deepspeed_path`` (see :func:`write_config`)."""
    if settings.finetuning_type not in ("full", "lora"):
        raise ValueError(f"finetuning_type must be 'full' or 'lora', not {settings.finetuning_type!r}")
    managed = sorted(MANAGED & set(settings.extra))
    if managed:
        raise ValueError(f"extra LLaMA-Factory arguments {managed} are set by the pipeline; use the asset config fields")
    cfg: dict[str, Any] = {
        "model_name_or_path": settings.model_name_or_path, "trust_remote_code": True,
        "stage": "sft", "do_train": True, "finetuning_type": settings.finetuning_type,
        "dataset": settings.dataset, "dataset_dir": str(dataset_dir), "template": settings.template,
        "cutoff_len": settings.cutoff_len, "overwrite_cache": True,
        "preprocessing_num_workers": settings.preprocessing_num_workers,
        "output_dir": str(output_dir), "logging_steps": settings.logging_steps, "save_steps": settings.save_steps,
        "save_total_limit": settings.save_total_limit, "save_only_model": True, "plot_loss": True, "report_to": "none",
        "per_device_train_batch_size": settings.per_device_train_batch_size,
        "gradient_accumulation_steps": settings.gradient_accumulation_steps,
        "learning_rate": settings.learning_rate, "num_train_epochs": settings.num_train_epochs,
        "lr_scheduler_type": settings.lr_scheduler_type, "warmup_ratio": settings.warmup_ratio, "bf16": settings.bf16,
        "flash_attn": settings.flash_attn, "disable_gradient_checkpointing": not settings.gradient_checkpointing,
        "include_num_input_tokens_seen": True, "ddp_timeout": 180000000,
    }
    if settings.finetuning_type == "lora":
        cfg.update(lora_rank=settings.lora_rank, lora_alpha=settings.lora_alpha, lora_target=settings.lora_target)
    if settings.deepspeed:
        cfg["deepspeed"] = settings.deepspeed
    elif gpus > 1:
        if deepspeed_path is None:
            raise ValueError("multi-GPU training uses DeepSpeed ZeRO-3: pass deepspeed_path")
        cfg["deepspeed"] = str(deepspeed_path)
    cfg.update(settings.extra)
    return cfg


def launch_env(gpus: int) -> dict[str, str]:
    """Environment of the training job: torchrun on every GPU of the node when there is more than one
    (``FORCE_TORCHRUN=1 NPROC_PER_NODE=N``, as the recipe launches ZeRO-3)."""
    return {"FORCE_TORCHRUN": "1", "NPROC_PER_NODE": str(gpus)} if gpus > 1 else {}


def checkpoint_version(mixture_version: str, settings: TrainSettings, gpus: int) -> str:
    """``ckpt-<hash>`` of (mixture version, settings, GPU count — it sets the global batch): the same
    mixture trained with the same settings is the same checkpoint version."""
    identity = {"mixture_version": mixture_version, "settings": asdict(settings), "gpus": gpus}
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()
    return f"ckpt-{digest[:12]}"


def write_config(cfg: dict[str, Any], path: Path, zero3_path: Path | None = None) -> Path:
    """Write the YAML file ``llamafactory-cli train`` reads, and the ZeRO-3 file when the config names
    ``zero3_path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if zero3_path is not None and cfg.get("deepspeed") == str(zero3_path):
        zero3_path.write_text(json.dumps(ZERO3, indent=2))
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def validate(cfg: dict[str, Any], python: str, timeout_s: float = 300) -> list[str]:
    """Parse ``cfg`` with LLaMA-Factory's own ``get_train_args`` in the job environment (``python``):
    an unknown or ill-typed argument raises :class:`InvalidTrainingArguments` with LLaMA-Factory's
    message. Device-dependent arguments the submitting machine cannot check (bf16/fp16 without a GPU,
    the DeepSpeed launch) are checked as far as possible there and left to the job; returns their names."""
    env = {k: v for k, v in os.environ.items() if k not in ("ALLOW_EXTRA_ARGS", "FORCE_TORCHRUN", "USE_MCA")}
    try:
        proc = subprocess.run([python, "-P", str(CHECK_SCRIPT)], input=json.dumps(cfg), capture_output=True, text=True,
                              timeout=timeout_s, env=env)
    except FileNotFoundError:
        raise InvalidTrainingArguments(f"the job environment's Python {python} does not exist "
                                       "(./forge train-env creates .venv-train)") from None
    report = None
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(CHECK_MARK):
            report = json.loads(line[len(CHECK_MARK):])
            break
    if report is None:
        raise InvalidTrainingArguments(f"the LLaMA-Factory argument check crashed (exit {proc.returncode}):\n"
                                       + "\n".join((proc.stderr or proc.stdout).splitlines()[-20:]))
    if not report["ok"]:
        raise InvalidTrainingArguments(f"LLaMA-Factory rejected the training arguments: {report['error']}")
    return report["deferred"]





def train_script(cli: str, config_path: Path, output_dir: Path, python: str, report_module: str, gpus: int) -> str:
    """Check the job's tools (and GPUs when it asked for some), train, then run ``report_module``
    (it reports checkpoint + metrics to the orchestrator through Dagster Pipes)."""
    q = shlex.quote
    gpu_check = (f"""command -v nvidia-smi >/dev/null && nvidia-smi -L || {{ echo "no NVIDIA GPU visible to the job" >&2; exit 3; }}\n"""
                 if gpus > 0 else "")
    return f"""[ -x {q(cli)} ] || {{ echo "llamafactory-cli not found at {cli}: install requirements-train.txt in the job's environment" >&2; exit 2; }}
{gpu_check}env -u PYTHONPATH {q(cli)} train {q(str(config_path))}
{q(python)} -m {report_module} train-report {q(str(output_dir))}
"""


def loss_curve(output_dir: Path) -> list[dict[str, Any]]:
    """The training log LLaMA-Factory writes (``trainer_log.jsonl``): step, loss, learning rate, tokens
    seen and throughput (tokens/s) per logging step."""
    path = output_dir / "trainer_log.jsonl"
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        if "loss" in entry:
            rows.append({"step": entry["current_steps"], "loss": entry["loss"], "lr": entry.get("lr"),
                         "epoch": entry.get("epoch"), "tokens": entry.get("total_tokens"),
                         "tokens_per_s": entry.get("throughput")})
    return rows


def run_report(output_dir: Path) -> dict[str, Any]:
    """What a finished training run left in ``output_dir``: the final metrics, the loss curve and the
    intermediate checkpoints."""
    results = output_dir / "all_results.json"
    if not results.exists():
        raise FileNotFoundError(f"{results} is missing: LLaMA-Factory did not finish training into {output_dir}")
    saved = sorted((p.name for p in output_dir.glob("checkpoint-*") if p.is_dir()), key=lambda n: int(n.split("-")[-1]))
    weights = sorted(p.name for p in output_dir.iterdir() if p.suffix in (".safetensors", ".bin") or p.name.endswith(".safetensors.index.json"))
    return {"checkpoint": str(output_dir), "metrics": json.loads(results.read_text()), "loss_curve": loss_curve(output_dir),
            "saved_checkpoints": saved, "weights": weights}


def loss_plot(curve: list[dict[str, Any]], path: Path, title: str) -> bytes:
    """PNG of the training loss against the step (written to ``path``, returned)."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.4), dpi=100)
    ax.plot([r["step"] for r in curve], [r["loss"] for r in curve], marker="o" if len(curve) < 40 else None)
    ax.set_xlabel("step")
    ax.set_ylabel("training loss")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    path.write_bytes(buf.getvalue())
    return buf.getvalue()
