"""LLaMA-Factory SFT on the exported Balance2 mixture: the training config (the published EnvSimBench recipe as
defaults, full or LoRA, any further LLaMA-Factory argument passed through), its validation by LLaMA-Factory's own
argument parser in the job environment before submission, checkpoint versions (mixture version × settings × topology ×
base-model revision × library versions), what the job asks the scheduler for, the job script (resumable, one or several
nodes), and what a finished run left behind (metrics, loss curve).
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
from pipeline.training.launchers import GPU_CHECK, MEM_GB_PER_GPU, JobNeeds
from pipeline.training.lf_check import MARK as CHECK_MARK

#: DeepSpeed ZeRO-3 as in LLaMA-Factory's examples/deepspeed/ds_z3_config.json (used on more than one GPU in total)
ZERO3: dict[str, Any] = {
    "train_batch_size": "auto",
    "train_micro_batch_size_per_gpu": "auto",
    "gradient_accumulation_steps": "auto",
    "gradient_clipping": "auto",
    "zero_allow_untested_optimizer": True,
    "fp16": {
        "enabled": "auto",
        "loss_scale": 0,
        "loss_scale_window": 1000,
        "initial_scale_power": 16,
        "hysteresis": 2,
        "min_loss_scale": 1,
    },
    "bf16": {"enabled": "auto"},
    "zero_optimization": {
        "stage": 3,
        "overlap_comm": False,
        "contiguous_gradients": True,
        "sub_group_size": 1e9,
        "reduce_bucket_size": "auto",
        "stage3_prefetch_bucket_size": "auto",
        "stage3_param_persistence_threshold": "auto",
        "stage3_max_live_parameters": 1e9,
        "stage3_max_reuse_distance": 1e9,
        "stage3_gather_16bit_weights_on_model_save": True,
    },
}

#: arguments the pipeline sets itself; ``extra`` may not override them
MANAGED = frozenset(
    "stage do_train dataset_dir output_dir finetuning_type deepspeed gradient_accumulation_steps "
    "resume_from_checkpoint".split()
)

#: the file written next to a finished checkpoint: its version and lineage
MANIFEST = "envsim_checkpoint.json"
#: the ZeRO-3 file of a multi-GPU run, in its output directory
ZERO3_FILE = "ds_z3_config.json"
REPORT_TO = ("none", "tensorboard", "wandb")
#: the time limit of a training job where the launcher sets none (a run cut there resumes when materialized again)
TRAIN_TIME_LIMIT_MIN = 24 * 60
#: the files that identify a local base model's weights: its config and the weight files (names and sizes)
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".index.json")

CHECK_SCRIPT = Path(__file__).with_name("lf_check.py")


class InvalidTrainingArguments(ValueError):
    """LLaMA-Factory's own argument parser rejected the training config (raised before submission)."""


@dataclass(frozen=True)
class TrainSettings:
    """What a training run is made of; the defaults are the published EnvSimBench recipe for the 4B
    simulator (full SFT of Qwen3-4B-Base). ``extra`` holds any further LLaMA-Factory argument."""

    model_name_or_path: str = setting("Qwen/Qwen3-4B-Base", "Base model (Hub id or directory).")
    model_revision: str | None = setting(
        None,
        "Base model revision: a Hub branch, tag or commit (default main), or a name "
        "for a local directory (default: a hash of its config.json and weight files). "
        "Part of the checkpoint version.",
    )
    finetuning_type: Literal["full", "lora"] = setting("full", "Full fine-tuning or LoRA.")
    template: str = setting("qwen", "LLaMA-Factory chat template.")
    dataset: str = setting(
        "envsim_chat",
        "A dataset of the export's dataset_info.json: envsim_chat, envsim_alpaca, or "
        "envsim_envsimbench_alpaca (the published EnvSimBench Alpaca records; export the "
        "mixture with envsimbench_format: true).",
    )
    cutoff_len: int = setting(8192, "Longest tokenized sample; longer ones are cut.")
    learning_rate: float = setting(2e-5, "Peak learning rate.")
    num_train_epochs: float = setting(3.0, "Epochs over the mixture.")
    per_device_train_batch_size: int = setting(1, "Samples per GPU per step.")
    global_batch_size: int = setting(
        32,
        "Samples per optimizer update on all GPUs together; the gradient accumulation is "
        "global / (per-device batch × GPUs), so it stays the same on any GPU count.",
    )
    lr_scheduler_type: str = setting("cosine", "Learning-rate schedule.")
    warmup_ratio: float = setting(0.05, "Share of the steps spent warming up.")
    bf16: bool = setting(True, "Train in bfloat16.")
    gradient_checkpointing: bool = setting(True, "Recompute activations to save memory.")
    flash_attn: str = setting("fa2", "LLaMA-Factory's flash_attn: auto, disabled, sdpa, fa2.")
    save_steps: int = setting(
        200, "Save a checkpoint (with optimizer state: a stopped run resumes from it) every this many steps."
    )
    save_total_limit: int = setting(3, "Checkpoints kept.")
    logging_steps: int = setting(10, "Log the loss every this many steps.")
    preprocessing_num_workers: int = setting(
        16, "Processes tokenizing the dataset; the training job asks for as many CPUs (at least one per GPU)."
    )
    seed: int = setting(42, "Random seed of the run (LLaMA-Factory's seed and data_seed).")
    report_to: Literal["none", "tensorboard", "wandb"] = setting(
        "none", "Experiment tracking: none, tensorboard (logs under the checkpoint's tensorboard/) or wandb."
    )
    lora_rank: int = setting(16, "LoRA rank (finetuning_type lora).")
    lora_alpha: int = setting(32, "LoRA alpha (finetuning_type lora).")
    lora_target: str = setting("all", "Modules LoRA adapts (finetuning_type lora).")
    deepspeed: str | None = setting(None, "A DeepSpeed config file; default: ZeRO-3 on more than one GPU in total.")
    extra: dict[str, Any] = setting(
        factory=dict,
        description="Any further LLaMA-Factory training argument (e.g. max_steps, "
        "max_samples); checked by LLaMA-Factory's own parser before submission.",
    )


def accumulation_steps(settings: TrainSettings, gpus: int, nodes: int = 1) -> int:
    """Gradient accumulation that makes ``global_batch_size`` from the per-device batch on ``gpus`` × ``nodes``
    GPUs (no GPU: one process)."""
    devices = max(gpus, 1) * nodes
    per_step = settings.per_device_train_batch_size * devices
    if settings.global_batch_size < per_step or settings.global_batch_size % per_step:
        raise ValueError(
            f"global_batch_size {settings.global_batch_size} is not a multiple of per_device_train_batch_size "
            f"{settings.per_device_train_batch_size} × {devices} GPU{'s' if devices > 1 else ''} = {per_step}: "
            f"set global_batch_size to a multiple of {per_step} or change the per-device batch"
        )
    return settings.global_batch_size // per_step


def sft_config(
    settings: TrainSettings,
    dataset_dir: Path,
    output_dir: Path,
    gpus: int = 1,
    nodes: int = 1,
    deepspeed_path: Path | None = None,
    workers: int | None = None,
    run_name: str | None = None,
) -> dict[str, Any]:
    """The LLaMA-Factory training config (the mapping its YAML file holds) for ``gpus`` GPUs on each of ``nodes``
    nodes. On more than one GPU in total and without a ``deepspeed`` file of its own, the run uses ZeRO-3 from
    ``deepspeed_path`` (see :func:`write_config`). ``workers`` overrides ``preprocessing_num_workers`` (see
    :func:`train_needs`); ``run_name`` names the run for W&B."""
    if settings.finetuning_type not in ("full", "lora"):
        raise ValueError(f"finetuning_type must be 'full' or 'lora', not {settings.finetuning_type!r}")
    if settings.report_to not in REPORT_TO:
        raise ValueError(f"report_to must be one of {', '.join(REPORT_TO)}, not {settings.report_to!r}")
    if nodes > 1 and gpus < 1:
        raise ValueError(f"training on {nodes} nodes needs GPUs: set gpus (per node) to at least 1, or nodes to 1")
    if managed := sorted(MANAGED & set(settings.extra)):
        raise ValueError(
            f"extra LLaMA-Factory arguments {managed} are set by the pipeline; use the asset config fields"
        )
    cfg: dict[str, Any] = {
        "model_name_or_path": settings.model_name_or_path,
        "trust_remote_code": True,
        "stage": "sft",
        "do_train": True,
        "finetuning_type": settings.finetuning_type,
        "dataset": settings.dataset,
        "dataset_dir": str(dataset_dir),
        "template": settings.template,
        "cutoff_len": settings.cutoff_len,
        "overwrite_cache": True,
        "preprocessing_num_workers": settings.preprocessing_num_workers if workers is None else workers,
        "output_dir": str(output_dir),
        "logging_steps": settings.logging_steps,
        "save_steps": settings.save_steps,
        "save_total_limit": settings.save_total_limit,
        "plot_loss": True,
        "report_to": settings.report_to,
        "per_device_train_batch_size": settings.per_device_train_batch_size,
        "gradient_accumulation_steps": accumulation_steps(settings, gpus, nodes),
        "learning_rate": settings.learning_rate,
        "num_train_epochs": settings.num_train_epochs,
        "lr_scheduler_type": settings.lr_scheduler_type,
        "warmup_ratio": settings.warmup_ratio,
        "bf16": settings.bf16,
        "flash_attn": settings.flash_attn,
        "disable_gradient_checkpointing": not settings.gradient_checkpointing,
        "seed": settings.seed,
        "data_seed": settings.seed,
        "include_num_input_tokens_seen": True,
        "ddp_timeout": 180000000,
    }
    if not Path(settings.model_name_or_path).is_dir():
        cfg["model_revision"] = settings.model_revision or "main"
    if run_name is not None:
        cfg["run_name"] = run_name
    if settings.finetuning_type == "lora":
        cfg.update(lora_rank=settings.lora_rank, lora_alpha=settings.lora_alpha, lora_target=settings.lora_target)
    if settings.deepspeed:
        cfg["deepspeed"] = settings.deepspeed
    elif max(gpus, 1) * nodes > 1:
        if deepspeed_path is None:
            raise ValueError("multi-GPU training uses DeepSpeed ZeRO-3: pass deepspeed_path")
        cfg["deepspeed"] = str(deepspeed_path)
    cfg.update(settings.extra)
    return cfg


def check_dataset(dataset_dir: Path, name: str) -> None:
    """Fail before submission when the export's ``dataset_info.json`` has no dataset ``name`` (LLaMA-Factory would
    fail only in the job, after its wait in the queue)."""
    info_path = dataset_dir / "dataset_info.json"
    held = sorted(json.loads(info_path.read_text()))
    if name in held:
        return
    fix = (
        "export the mixture in the published format first (sft_dataset config envsimbench_format: true)"
        if "envsimbench" in name
        else "choose one of those"
    )
    raise ValueError(f"dataset {name!r} is not in {info_path} (it holds {', '.join(held)}): {fix}")


def train_needs(settings: TrainSettings, gpus: int, cpus: int | None = None) -> tuple[JobNeeds, int]:
    """(What the training job asks for where the launcher leaves it unset, the tokenizing workers): the one place
    where the job's CPUs and LLaMA-Factory's ``preprocessing_num_workers`` follow each other. The job asks for a
    CPU per worker, at least one per GPU (torchrun starts a process per GPU); a launcher that fixes ``cpus`` gets
    at most that many workers. Memory: ``MEM_GB_PER_GPU`` per GPU (at least that); time: ``TRAIN_TIME_LIMIT_MIN``."""
    workers = (
        settings.preprocessing_num_workers if cpus is None else max(1, min(settings.preprocessing_num_workers, cpus))
    )
    return JobNeeds(
        cpus=max(workers, gpus, 1), mem_gb=MEM_GB_PER_GPU * max(gpus, 1), time_limit_min=TRAIN_TIME_LIMIT_MIN
    ), workers


def launch_env(gpus: int, nodes: int = 1) -> dict[str, str]:
    """Environment of the training job: on more than one GPU in total, LLaMA-Factory's torchrun launcher
    (``FORCE_TORCHRUN=1``) with ``NPROC_PER_NODE`` = GPUs per node and ``NNODES``; the job script adds the
    rendezvous of several nodes (see :func:`train_script`)."""
    if max(gpus, 1) * nodes <= 1:
        return {}
    return {"FORCE_TORCHRUN": "1", "NPROC_PER_NODE": str(max(gpus, 1)), "NNODES": str(nodes)}


def tracking_env(settings: TrainSettings, output_dir: Path) -> dict[str, str]:
    """Environment of the training job for its experiment tracking: TensorBoard writes under the checkpoint
    (``<output_dir>/tensorboard``; transformers 5 reads the directory from ``TENSORBOARD_LOGGING_DIR`` only,
    its ``logging_dir`` argument is deprecated and ignored). W&B takes its own variables (``WANDB_API_KEY``,
    ``WANDB_PROJECT``, ``WANDB_MODE``) from the environment the job inherits."""
    return {"TENSORBOARD_LOGGING_DIR": str(output_dir / "tensorboard")} if settings.report_to == "tensorboard" else {}


def base_model_revision(settings: TrainSettings) -> str:
    """What identifies the base model's weights: ``model_revision`` when set; for a local directory, a hash of its
    ``config.json`` and of its weight files' names and sizes (``files:<hash>``); for a Hub id, ``main``."""
    if settings.model_revision:
        return settings.model_revision
    path = Path(settings.model_name_or_path)
    if not path.is_dir():
        return "main"
    config = path / "config.json"
    if not config.is_file():
        raise FileNotFoundError(
            f"{path} holds no config.json: model_name_or_path must be a Hub id or a model directory"
        )
    digest = hashlib.sha256(config.read_bytes())
    for weight in sorted(p for p in path.iterdir() if p.is_file() and p.name.endswith(WEIGHT_SUFFIXES)):
        digest.update(f"\n{weight.name}:{weight.stat().st_size}".encode())
    return f"files:{digest.hexdigest()[:16]}"


def _job_python(
    python: str, args: list[str], stdin: str, timeout_s: float, env: dict[str, str] | None
) -> dict[str, Any]:
    """Run ``lf_check.py`` with the job environment's Python; its report (the ``CHECK_MARK`` line)."""
    environ = {k: v for k, v in os.environ.items() if k not in ("ALLOW_EXTRA_ARGS", "FORCE_TORCHRUN", "USE_MCA")}
    try:
        proc = subprocess.run(
            [python, "-P", str(CHECK_SCRIPT), *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env={**environ, **(env or {})},
        )
    except FileNotFoundError:
        raise InvalidTrainingArguments(
            f"the job environment's Python {python} does not exist (./forge train-env creates .venv-train)"
        ) from None
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(CHECK_MARK):
            return json.loads(line[len(CHECK_MARK) :])
    raise InvalidTrainingArguments(
        f"the LLaMA-Factory argument check crashed (exit {proc.returncode}):\n"
        + "\n".join((proc.stderr or proc.stdout).splitlines()[-20:])
    )


def library_versions(python: str, env: dict[str, str] | None = None, timeout_s: float = 60) -> dict[str, str | None]:
    """The versions of the training libraries (LLaMA-Factory, transformers, torch, …) installed in the job
    environment (``python``), None for one that is not installed."""
    return _job_python(python, ["--versions"], "", timeout_s, env)["versions"]


def checkpoint_version(
    mixture_version: str,
    settings: TrainSettings,
    gpus: int,
    nodes: int = 1,
    *,
    revision: str,
    versions: dict[str, str | None],
) -> str:
    """``ckpt-<hash>`` of what makes the weights: the mixture version, the settings, the topology (GPUs per node,
    nodes), the base model's revision (:func:`base_model_revision`) and the job environment's library versions
    (:func:`library_versions`). The same of all of these is the same checkpoint version (and resumes its run)."""
    identity = {
        "mixture_version": mixture_version,
        "settings": asdict(settings),
        "gpus": gpus,
        "nodes": nodes,
        "base_model_revision": revision,
        "library_versions": versions,
    }
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


def validate(cfg: dict[str, Any], python: str, timeout_s: float = 300, env: dict[str, str] | None = None) -> list[str]:
    """Parse ``cfg`` with LLaMA-Factory's own ``get_train_args`` in the job environment (``python``, with the
    job's ``env``): an unknown or ill-typed argument raises :class:`InvalidTrainingArguments` with LLaMA-Factory's
    message. The files the config names (the DeepSpeed file) must be written first (:func:`write_config`).
    Device-dependent arguments the submitting machine cannot check (bf16/fp16 without a GPU, the DeepSpeed
    launch) are checked as far as possible there and left to the job; returns their names."""
    report = _job_python(python, [], json.dumps(cfg), timeout_s, env)
    if not report["ok"]:
        raise InvalidTrainingArguments(f"LLaMA-Factory rejected the training arguments: {report['error']}")
    return report["deferred"]


def train_script(
    cli: str, config_path: Path, output_dir: Path, python: str, report: str, gpus: int, nodes: int = 1
) -> str:
    """The training job's script: check the job's tools (and GPUs when it asked for some), train, then run the
    ``report`` command (it reports checkpoint + metrics to the orchestrator through Dagster Pipes).

    Re-running it continues the run (Slurm runs a requeued job's script again; a new materialization writes the
    same output directory): training resumes from the latest complete ``checkpoint-N`` there
    (``resume_from_checkpoint``). While it trains, each new checkpoint is recorded with its lineage
    (``python -m pipeline.training.steps watch``; again at the end, also when training fails). On several nodes,
    ``srun`` starts one task per node and LLaMA-Factory's torchrun launcher reads the rendezvous from Slurm:
    ``MASTER_ADDR`` (the first node), ``MASTER_PORT`` (from the job id), ``NNODES`` and ``NODE_RANK``
    (``$SLURM_NODEID``); ``NPROC_PER_NODE`` (GPUs per node) comes from :func:`launch_env`."""
    q = shlex.quote
    train = f"env -u PYTHONPATH {q(cli)} train {q(str(config_path))} $LF_RESUME_ARG"
    if nodes > 1:
        launch = (
            'export NNODES="${SLURM_JOB_NUM_NODES:?training on several nodes runs under Slurm: '
            'use the slurm backend}"\n'
            'export MASTER_ADDR="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)"\n'
            "export MASTER_PORT=$((20000 + SLURM_JOB_ID % 20000))\n"
            # srun takes the CPUs per task again (Slurm ≥ 22.05 does not pass sbatch's on); one failed node ends all
            f'srun --nodes={nodes} --ntasks={nodes} --ntasks-per-node=1 --cpus-per-task="${{SLURM_CPUS_PER_TASK:-1}}" '
            f"--kill-on-bad-exit=1 bash -c {q('export NODE_RANK=$SLURM_NODEID; exec ' + train)}\n"
        )
    else:
        launch = train + "\n"
    return f"""[ -x {q(cli)} ] || {{ echo "llamafactory-cli not found at {cli}: install requirements-train.txt in \
the job's environment" >&2; exit 2; }}
{GPU_CHECK if gpus > 0 else ""}run_dir={q(str(output_dir))}
python={q(python)}
export LF_RESUME_ARG="$("$python" -m pipeline.training.steps resume "$run_dir")"
if [ -n "$LF_RESUME_ARG" ]; then echo "resuming from ${{LF_RESUME_ARG#resume_from_checkpoint=}}"; fi
"$python" -m pipeline.training.steps watch "$run_dir" &
watcher=$!
trap 'kill "$watcher" 2>/dev/null; "$python" -m pipeline.training.steps scan "$run_dir"' EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
{launch}trap - EXIT
kill "$watcher" 2>/dev/null || true
wait "$watcher" 2>/dev/null || true
"$python" -m pipeline.training.steps scan "$run_dir"
{report}
"""


def loss_curve(output_dir: Path) -> list[dict[str, Any]]:
    """The training log LLaMA-Factory writes (``trainer_log.jsonl``): step, loss, learning rate, tokens
    seen and throughput (tokens/s) per logging step."""
    path = output_dir / "trainer_log.jsonl"
    if not path.exists():
        return []
    return [
        {
            "step": entry["current_steps"],
            "loss": entry["loss"],
            "lr": entry.get("lr"),
            "epoch": entry.get("epoch"),
            "tokens": entry.get("total_tokens"),
            "tokens_per_s": entry.get("throughput"),
        }
        for entry in map(json.loads, path.read_text().splitlines())
        if "loss" in entry
    ]


def run_report(output_dir: Path) -> dict[str, Any]:
    """What a finished training run left in ``output_dir``: the final metrics, the loss curve and the
    intermediate checkpoints."""
    results = output_dir / "all_results.json"
    if not results.exists():
        raise FileNotFoundError(f"{results} is missing: LLaMA-Factory did not finish training into {output_dir}")
    saved = sorted((p.name for p in output_dir.glob("checkpoint-*") if p.is_dir()), key=lambda n: int(n.split("-")[-1]))
    weights = sorted(
        p.name
        for p in output_dir.iterdir()
        if p.suffix in (".safetensors", ".bin") or p.name.endswith(".safetensors.index.json")
    )
    return {
        "checkpoint": str(output_dir),
        "metrics": json.loads(results.read_text()),
        "loss_curve": loss_curve(output_dir),
        "saved_checkpoints": saved,
        "weights": weights,
    }


def loss_plot(curve: list[dict[str, Any]], path: Path, title: str) -> bytes:
    """PNG of the training loss against the step (written to ``path``, returned)."""
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
    fig.savefig(path, format="png")
    plt.close(fig)
    return path.read_bytes()
