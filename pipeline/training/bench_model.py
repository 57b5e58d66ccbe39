"""``./forge bench-model``: measure a real model as a simulator through the project's own serving
(:mod:`pipeline.training.serve`: ``llamafactory-cli api``) and evaluation path (:func:`pipeline.evaluate.run.score_all`)
on a stratified subset of the current benchmark — the first ``per_cell`` samples of every cell in the split's pick
order, so every cell is represented. By default it scores the embedded base model (SmolLM2-135M-Instruct,
:mod:`pipeline.training.base_models`); ``checkpoint`` scores a trained one (a version, ``latest``, a directory or an
embedded model's name, or a Hub id found in the local Hugging Face cache: nothing is downloaded, and weights that
are not here are one line saying how to provide them, checked before anything is installed). Results are cached and
stored by the served weights' id, never by the served name: the per-sample rows go to ``eval_results`` / ``eval_runs``
and one row per measurement to ``bench_model_runs`` (weights id, the GGUF's sha256 for an embedded model, backend,
subset, throughput), all in ``envsim.duckdb``.
"""

from __future__ import annotations

import re
import shutil
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from pipeline.core.progress import Log
from pipeline.evaluate.harness import finished_steps
from pipeline.evaluate.results import breakdown, load_run
from pipeline.evaluate.run import score_all
from pipeline.evaluate.samples import load_samples
from pipeline.evaluate.simulators import SimulatorSpec, simulator_spec
from pipeline.store import catalog, warehouse
from pipeline.store.duck import connect_file
from pipeline.store.layout import DataLayout
from pipeline.training import base_models, checkpoints
from pipeline.training.serve import FREE_PORT, HOST, ServeSpec, serve

#: the endpoint of a measurement whose every sample is scored already (nothing is asked; no server is started)
NOT_SERVED = f"http://{HOST}:{FREE_PORT}/v1"


@dataclass
class BenchResult:
    run_id: str
    weights_id: str
    split_version: str
    samples: int
    scored: int
    resumed: int
    seconds: float
    cells: pd.DataFrame


def all_scored(layout: DataLayout, version: str, subset: list[dict[str, Any]], spec: SimulatorSpec) -> bool:
    """Whether every sample of ``subset`` has a finished answer from ``spec``'s weights in its results file (the
    harness would resume them all and ask nothing)."""
    done = finished_steps(layout.eval_results(version, spec.results_name), spec.prompt, spec.cache_identity())
    return all(s["step_id"] in done for s in subset)


def stratified_subset(samples: list[dict[str, Any]], per_cell: int) -> list[dict[str, Any]]:
    """The first ``per_cell`` samples of every cell (``stratum``) in the split's pick order (``position``)."""
    if per_cell < 1:
        raise ValueError(f"per_cell must be at least 1, not {per_cell}")
    taken: dict[str, int] = {}
    out = []
    for sample in sorted(samples, key=lambda s: s.get("position", 0)):
        cell = sample["stratum"]
        if taken.get(cell, 0) < per_cell:
            taken[cell] = taken.get(cell, 0) + 1
            out.append(sample)
    return out


class ModelUnavailable(ValueError):
    """``--checkpoint`` names weights that are not on this machine (or cannot be served as given): one line
    saying how to provide them offline."""


#: what a Hugging Face Hub model id looks like (``Qwen/Qwen2.5-0.5B-Instruct``)
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def hub_snapshot(repo_id: str, cache_dir: str | Path | None = None) -> Path | None:
    """The directory of ``repo_id``'s snapshot in the local Hugging Face cache (``HF_HUB_CACHE``, else
    ``$HF_HOME/hub``; or ``cache_dir``) when it holds a ``config.json`` and weight files; None otherwise. Offline:
    nothing is asked of the Hub."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        path = Path(snapshot_download(repo_id, local_files_only=True, cache_dir=cache_dir))
    except (LocalEntryNotFoundError, ValueError, OSError):
        return None
    weights = [p for p in path.iterdir() if p.suffix in checkpoints.WEIGHT_SUFFIXES]
    return path if (path / "config.json").is_file() and weights else None


def find_weights(ref: str, data_root: Path, cache_dir: str | Path | None = None) -> tuple[Path, dict[str, Any] | None]:
    """``(directory, checkpoint manifest or None)`` of a ``--checkpoint`` that is not an embedded model's name: a
    checkpoint version, ``latest``, ``<version>/step-N``, a directory, or a Hub id in the local Hugging Face cache;
    :class:`ModelUnavailable` (one line: how to provide the weights offline) when there are none here."""
    try:
        return checkpoints.resolve(data_root, ref)
    except FileNotFoundError as exc:
        if _HUB_ID.match(ref) and not checkpoints._STEP_REF.match(ref) and not Path(ref).exists():
            if (snapshot := hub_snapshot(ref, cache_dir)) is not None:
                return snapshot, None
            from huggingface_hub import constants

            raise ModelUnavailable(
                f"--checkpoint {ref}: no directory {ref} and no snapshot of the Hub model {ref} in the Hugging "
                f"Face cache ({cache_dir or constants.HF_HUB_CACHE}); bench-model does not download: fetch it where "
                f"there is network (hf download {ref}) into the shared cache (HF_HOME / HF_HUB_CACHE), or pass the "
                "directory holding its config.json and weights"
            ) from None
        raise ModelUnavailable(
            f"--checkpoint {ref}: {exc}; pass an embedded model ({', '.join(base_models.EMBEDDED)}), a checkpoint "
            f"version, latest, <version>/step-N, a directory, or a Hub id in the Hugging Face cache"
        ) from None


def _template(
    ref: str, path: Path, manifest: dict[str, Any] | None, origin: dict[str, Any] | None, template: str | None
) -> str:
    chosen = template or (manifest or {}).get("settings", {}).get("template") or (origin or {}).get("template")
    if not chosen:
        raise ModelUnavailable(
            f"--checkpoint {ref}: {path} was not trained or converted by this pipeline, so its chat "
            f"template is unknown: pass --template (e.g. qwen for Qwen models, smollm2, llama3)"
        )
    return chosen


def check_model(ref: str, data_root: Path, template: str | None, cache_dir: str | Path | None = None) -> str:
    """What ``./forge bench-model`` checks before it installs the serving environment: ``ref`` is an embedded
    model (converted later, in that environment), or its weights are here and its chat template is known;
    else :class:`ModelUnavailable`. Returns what was found, for the line ``--check`` prints."""
    if ref in base_models.EMBEDDED:
        return f"{ref} is embedded (converted when first served)"
    path, manifest = find_weights(ref, data_root, cache_dir)
    chosen = _template(ref, path, manifest, base_models.lineage(path), template)
    return f"{ref}: weights at {path}, chat template {chosen}"


def resolve_model(
    ref: str, data_root: Path, python: str, template: str | None, log: Log = print
) -> tuple[Path, dict[str, Any] | None, dict[str, Any] | None, str]:
    """``(directory, checkpoint manifest, base-model lineage, template)`` of ``ref``: an embedded model's name
    (converted on first use), a checkpoint version, ``latest``, ``<version>/step-N``, a directory or a Hub id in
    the local Hugging Face cache (:func:`find_weights`)."""
    if ref in base_models.EMBEDDED:
        path = base_models.materialize(ref, data_root, python, log=log)
        manifest = None
    else:
        path, manifest = find_weights(ref, data_root)
    origin = base_models.lineage(path)
    return path, manifest, origin, _template(ref, path, manifest, origin, template)


def bench_model(
    data_root: Path,
    python: str,
    cli: str,
    ref: str = base_models.DEFAULT_MODEL,
    per_cell: int = 1,
    max_tokens: int = 512,
    backend: str = "huggingface",
    template: str | None = None,
    split_version: str | None = None,
    timeout_s: float = 900.0,
    ready_timeout_s: float = 900.0,
    dtype: str | None = None,
    log: Log = print,
) -> BenchResult:
    """Serve ``ref`` and score it on the stratified subset (no server when every sample is scored with its weights
    already); store and return the per-cell table. ``dtype`` is the served compute dtype (default: ``auto`` where
    ``nvidia-smi`` is on PATH, else ``float32``: bf16 on a CPU is many times slower)."""
    dtype = dtype or ("auto" if shutil.which("nvidia-smi") else "float32")
    layout = DataLayout.at(data_root)
    version, samples = load_samples(layout, split_version)
    subset = stratified_subset(samples, per_cell)
    path, manifest, origin, chosen = resolve_model(ref, layout.root.resolve(), python, template, log)
    wid = checkpoints.weights_id(path, manifest)
    name = checkpoints.default_served_name(path, wid, manifest)
    log(
        f"bench-model: {ref} ({path}; weights {wid}) on {len(subset)} samples of {version} "
        f"({per_cell} per cell, {len({s['stratum'] for s in subset})} cells), max_tokens {max_tokens}"
    )
    spec = ServeSpec(
        model_name_or_path=str(path),
        template=chosen,
        served_name=name,
        backend=backend,  # type: ignore[arg-type]
        ready_timeout_s=ready_timeout_s,
        llamafactory_cli=cli,
        llamafactory_python=python,
        infer_dtype=dtype,
    )  # type: ignore[arg-type]

    def checker(base_url: str) -> SimulatorSpec:
        return simulator_spec(
            name=name,
            kind="openai",
            model=name,
            base_url=base_url,
            max_tokens=max_tokens,
            api_key_env="",
            concurrency=1,
            timeout_s=timeout_s,
            max_retries=1,
            weights_id=wid,
        )

    started = time.perf_counter()
    unserved = checker(NOT_SERVED)
    if all_scored(layout, version, subset, unserved):  # results are cached by weights: nothing to ask
        log(f"bench-model: every sample is scored with weights {wid} already; no server is started")
        [run] = score_all(layout, version, subset, [unserved], lambda s: log(s.line()), keep_going=False)
        backend_used = None
    else:
        with serve(spec, layout.jobs / f"bench-model-{name}", log) as endpoint:
            sim = checker(endpoint.base_url)
            [run] = score_all(layout, version, subset, [sim], lambda s: log(s.line()), keep_going=False)
            backend_used = endpoint.backend
    seconds = time.perf_counter() - started
    with connect_file(layout.duckdb) as con:
        load_run(con, run.path, run.run_id)
        warehouse.ensure_table(con, "bench_model_runs")
        row = {
            "run_id": run.run_id,
            "model": ref,
            "path": str(path),
            "weights_id": wid,
            "gguf_sha256": (origin or {}).get("gguf_sha256"),
            "checkpoint_version": (manifest or {}).get("checkpoint_version"),
            "template": chosen,
            "backend": backend_used,
            "dtype": dtype,
            "split_version": version,
            "per_cell": per_cell,
            "samples": len(subset),
            "max_tokens": max_tokens,
            "scored": run.report.completed,
            "resumed": run.report.skipped,
            "seconds": round(seconds, 2),
            "samples_per_s": round(run.report.completed / run.report.seconds, 4)
            if run.report.completed and run.report.seconds
            else None,
            "created_at": datetime.now(UTC),
        }
        con.execute(
            f"INSERT INTO bench_model_runs ({', '.join(row)}) VALUES ({', '.join('?' for _ in row)})",
            list(row.values()),
        )
        catalog.describe(con)
        cells = breakdown(con, [run.run_id], "cell")
    return BenchResult(run.run_id, wid, version, len(subset), run.report.completed, run.report.skipped, seconds, cells)
