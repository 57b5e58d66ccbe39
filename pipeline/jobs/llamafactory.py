"""LLaMA-Factory SFT configs (full or LoRA) for the exported Balance2 mixture, and the job script."""

from __future__ import annotations

import shlex
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

#: argument names LLaMA-Factory's HfArgumentParser accepts for these sections (model / data / finetuning / training)
KNOWN_KEYS = {
    "model_name_or_path", "trust_remote_code", "stage", "do_train", "finetuning_type", "lora_rank", "lora_alpha",
    "lora_dropout", "lora_target", "deepspeed", "dataset", "dataset_dir", "template", "cutoff_len", "max_samples",
    "overwrite_cache", "preprocessing_num_workers", "output_dir", "logging_steps", "save_steps", "plot_loss",
    "overwrite_output_dir", "save_only_model", "report_to", "per_device_train_batch_size", "gradient_accumulation_steps",
    "learning_rate", "num_train_epochs", "lr_scheduler_type", "warmup_ratio", "bf16", "ddp_timeout",
    "enable_thinking",
}


@dataclass(frozen=True)
class TrainSettings:
    model_name_or_path: str = "Qwen/Qwen3-4B-Base"
    finetuning_type: str = "full"  # full | lora
    template: str = "qwen3"
    cutoff_len: int = 16384
    learning_rate: float = 1e-5
    num_train_epochs: float = 3.0
    per_device_train_batch_size: int = 1
    gradient_accumulation_steps: int = 16
    lr_scheduler_type: str = "cosine"
    warmup_ratio: float = 0.1
    bf16: bool = True
    lora_rank: int = 16
    lora_alpha: int = 32
    lora_target: str = "all"
    deepspeed: str | None = None


def sft_config(settings: TrainSettings, dataset_dir: Path, output_dir: Path, dataset: str = "envsim_chat") -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "model_name_or_path": settings.model_name_or_path, "trust_remote_code": True,
        "stage": "sft", "do_train": True, "finetuning_type": settings.finetuning_type,
        "dataset": dataset, "dataset_dir": str(dataset_dir), "template": settings.template, "cutoff_len": settings.cutoff_len,
        "overwrite_cache": True, "preprocessing_num_workers": 8,
        "output_dir": str(output_dir), "logging_steps": 10, "save_steps": 500, "plot_loss": True,
        "overwrite_output_dir": True, "save_only_model": True, "report_to": "none",
        "per_device_train_batch_size": settings.per_device_train_batch_size,
        "gradient_accumulation_steps": settings.gradient_accumulation_steps,
        "learning_rate": settings.learning_rate, "num_train_epochs": settings.num_train_epochs,
        "lr_scheduler_type": settings.lr_scheduler_type, "warmup_ratio": settings.warmup_ratio, "bf16": settings.bf16,
        "ddp_timeout": 180000000,
    }
    if settings.finetuning_type == "lora":
        cfg.update(lora_rank=settings.lora_rank, lora_alpha=settings.lora_alpha, lora_target=settings.lora_target)
    elif settings.finetuning_type != "full":
        raise ValueError(f"finetuning_type must be 'full' or 'lora', not {settings.finetuning_type!r}")
    if settings.deepspeed:
        cfg["deepspeed"] = settings.deepspeed
    unknown = set(cfg) - KNOWN_KEYS
    if unknown:
        raise ValueError(f"not LLaMA-Factory arguments: {sorted(unknown)}")
    return cfg


def train_script(config_path: Path, output_dir: Path, python: str, report_module: str) -> str:
    """Check the tools, train, then run ``report_module`` (it reports checkpoint + metrics to the orchestrator)."""
    return f"""command -v llamafactory-cli >/dev/null || {{ echo "llamafactory-cli not found: install LLaMA-Factory in the job's environment" >&2; exit 2; }}
command -v nvidia-smi >/dev/null && nvidia-smi -L || {{ echo "no NVIDIA GPU visible to the job" >&2; exit 3; }}
llamafactory-cli train {shlex.quote(str(config_path))}
{shlex.quote(python)} -m {report_module} train-report {shlex.quote(str(output_dir))}
"""


def as_dict(settings: TrainSettings) -> dict[str, Any]:
    return asdict(settings)
