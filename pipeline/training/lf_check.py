"""Validate a LLaMA-Factory training config with LLaMA-Factory's own argument parser, and report the
versions of the training libraries.

Run by the job environment's Python, by path (``python -P lf_check.py < config.json``; ``-P`` keeps this
directory, which holds ``llamafactory.py``, off ``sys.path``), so it needs nothing
but LLaMA-Factory there; prints one ``ENVSIM-LF-CHECK {json}`` line: ``ok``, ``error`` (LLaMA-Factory's
message) and ``deferred`` (arguments only the job's own hardware can check). ``python -P lf_check.py
--versions`` prints ``{"versions": {library: version or null}}`` instead (from the installed distributions'
metadata: nothing is imported). Imports only the standard library at module level, so the domain core stays
importable without LLaMA-Factory.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import tempfile
from importlib import metadata
from pathlib import Path

MARK = "ENVSIM-LF-CHECK "
#: the libraries whose versions make a checkpoint (its version hashes them)
LIBRARIES = ("llamafactory", "transformers", "torch", "accelerate", "peft", "trl", "datasets", "tokenizers")
LIBRARIES += ("deepspeed", "flash-attn")


def versions(names: tuple[str, ...] = LIBRARIES) -> dict[str, str | None]:
    """The installed version of each distribution in ``names`` (None: not installed)."""
    found: dict[str, str | None] = {}
    for name in names:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def check(cfg: dict) -> dict:
    """``get_train_args`` on ``cfg`` (the call ``llamafactory-cli train`` makes on its YAML file)."""
    try:
        import torch
        from llamafactory.extras.misc import check_version
        from llamafactory.hparams import get_train_args
    except ImportError as exc:
        return {
            "ok": False,
            "error": f"LLaMA-Factory is not installed in {sys.executable} ({exc}); "
            "install requirements-train.txt there (./forge train-env)",
            "deferred": [],
        }
    tracker = cfg.get("report_to", "none")
    module = {"tensorboard": ("tensorboard", "tensorboardX"), "wandb": ("wandb",)}.get(tracker, ())
    if module and not any(importlib.util.find_spec(m) for m in module):
        return {
            "ok": False,
            "deferred": [],
            "error": f"report_to {tracker} needs the {module[0]} package in {sys.executable}: "
            f"pip install {module[0]} there, or set report_to: none",
        }
    probe, deferred = dict(cfg), []
    if not torch.cuda.is_available():  # the submitting machine: mixed precision is the GPU node's to check
        for key in ("bf16", "fp16", "pure_bf16", "tf32"):
            if probe.get(key) is True:
                probe[key] = False
                deferred.append(key)
    try:
        if probe.get("deepspeed"):
            # DeepSpeed runs under torchrun on the job's GPUs: here, it must be installed and its config must parse
            check_version("deepspeed", mandatory=True)
            json.loads(Path(probe.pop("deepspeed")).read_text())
            deferred.append("deepspeed")
        with tempfile.TemporaryDirectory() as scratch:
            probe["output_dir"] = scratch  # never touch (or resume from) the real output directory
            get_train_args(probe)
    except (ValueError, TypeError, KeyError, ImportError, RuntimeError, OSError) as exc:
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}", "deferred": deferred}
    return {"ok": True, "error": None, "deferred": deferred}


if __name__ == "__main__":
    report = {"versions": versions()} if sys.argv[1:] == ["--versions"] else check(json.load(sys.stdin))
    print(MARK + json.dumps(report), flush=True)
