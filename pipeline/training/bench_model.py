"""``./forge bench-model``: measure a real model as a simulator through the project's own serving
(:mod:`pipeline.training.serve`: ``llamafactory-cli api``) and evaluation path (:func:`pipeline.evaluate.run.score_all`)
on a stratified subset of the current benchmark — the first ``per_cell`` samples of every cell in the split's pick
order, so every cell is represented. By default it scores the embedded base model (SmolLM2-135M-Instruct,
:mod:`pipeline.training.base_models`); ``checkpoint`` scores a trained one (a version, ``latest``, a directory or an
embedded model's name). Results are cached and stored by the served weights' id, never by the served name: the
per-sample rows go to ``eval_results`` / ``eval_runs`` and one row per measurement to ``bench_model_runs``
(weights id, the GGUF's sha256 for an embedded model, backend, subset, throughput), all in ``envsim.duckdb``.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from pipeline.store import catalog
from pipeline.evaluate.results import breakdown, load_run
from pipeline.evaluate.run import score_all
from pipeline.evaluate.samples import load_samples
from pipeline.evaluate.simulators import SimulatorSpec
from pipeline.store.duck import connect_file
from pipeline.store.layout import DataLayout
from pipeline.training import base_models, checkpoints
from pipeline.training.serve import ServeSpec, serve

#: one row per bench-model measurement (DuckDB ``bench_model_runs``)
RUNS_TABLE = {
    "run_id": "VARCHAR", "model": "VARCHAR", "path": "VARCHAR", "weights_id": "VARCHAR", "gguf_sha256": "VARCHAR",
    "checkpoint_version": "VARCHAR", "template": "VARCHAR", "backend": "VARCHAR", "dtype": "VARCHAR", "split_version": "VARCHAR",
    "per_cell": "INTEGER", "samples": "INTEGER", "max_tokens": "INTEGER", "scored": "INTEGER", "resumed": "INTEGER",
    "seconds": "DOUBLE", "samples_per_s": "DOUBLE", "created_at": "TIMESTAMPTZ",
}


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


def resolve_model(ref: str, data_root: Path, python: str, template: str | None,
                  log: Callable[[str], None] = print) -> tuple[Path, dict[str, Any] | None, dict[str, Any] | None, str]:
    """``(directory, checkpoint manifest, base-model lineage, template)`` of ``ref``: an embedded model's name
    (converted on first use), a checkpoint version, ``latest``, ``<version>/step-N`` or a directory."""
    if ref in base_models.EMBEDDED:
        path = base_models.materialize(ref, data_root, python, log=log)
        manifest = None
    else:
        path, manifest = checkpoints.resolve(data_root, ref)
    origin = base_models.lineage(path)
    settings = (manifest or {}).get("settings", {})
    chosen = template or settings.get("template") or (origin or {}).get("template")
    if not chosen:
        raise ValueError(f"{path} was not trained or converted by this pipeline: pass --template (e.g. smollm2, qwen)")
    return path, manifest, origin, chosen


def bench_model(data_root: Path, python: str, cli: str, ref: str = base_models.DEFAULT_MODEL, per_cell: int = 1,
                max_tokens: int = 512, backend: str = "huggingface", template: str | None = None,
                split_version: str | None = None, timeout_s: float = 900.0, ready_timeout_s: float = 900.0,
                dtype: str | None = None, log: Callable[[str], None] = print) -> BenchResult:
    """Serve ``ref`` and score it on the stratified subset; store and return the per-cell table. ``dtype`` is
    the served compute dtype (default: ``auto`` where ``nvidia-smi`` is on PATH, else ``float32``: bf16 on a
    CPU is many times slower)."""
    dtype = dtype or ("auto" if shutil.which("nvidia-smi") else "float32")
    layout = DataLayout.at(data_root)
    root = layout.root.resolve()
    version, samples = load_samples(layout, split_version)
    subset = stratified_subset(samples, per_cell)
    path, manifest, origin, chosen = resolve_model(ref, root, python, template, log)
    wid = checkpoints.weights_id(path, manifest)
    name = checkpoints.default_served_name(path, wid, manifest)
    log(f"bench-model: {ref} ({path}; weights {wid}) on {len(subset)} samples of {version} "
        f"({per_cell} per cell, {len({s['stratum'] for s in subset})} cells), max_tokens {max_tokens}")
    spec = ServeSpec(model_name_or_path=str(path), template=chosen, served_name=name, backend=backend,  # type: ignore[arg-type]
                     ready_timeout_s=ready_timeout_s, llamafactory_cli=cli, llamafactory_python=python,
                     infer_dtype=dtype)  # type: ignore[arg-type]
    started = time.perf_counter()
    with serve(spec, layout.jobs / f"bench-model-{name}", log) as endpoint:
        sim = SimulatorSpec(name=name, kind="openai", model=name, base_url=endpoint.base_url, max_tokens=max_tokens,
                            concurrency=1, timeout_s=timeout_s, max_retries=1, weights_id=wid)
        [run] = score_all(layout, version, subset, [sim], lambda s: log(s.line()), keep_going=False)
        backend_used = endpoint.backend
    seconds = time.perf_counter() - started
    with connect_file(layout.duckdb) as con:
        load_run(con, run.path, run.run_id)
        con.execute(f"CREATE TABLE IF NOT EXISTS bench_model_runs ({', '.join(f'{c} {t}' for c, t in RUNS_TABLE.items())})")
        row = {"run_id": run.run_id, "model": ref, "path": str(path), "weights_id": wid,
               "gguf_sha256": (origin or {}).get("gguf_sha256"),
               "checkpoint_version": (manifest or {}).get("checkpoint_version"), "template": chosen,
               "backend": backend_used, "dtype": dtype, "split_version": version, "per_cell": per_cell, "samples": len(subset),
               "max_tokens": max_tokens, "scored": run.report.completed, "resumed": run.report.skipped,
               "seconds": round(seconds, 2), "samples_per_s": round(run.report.completed / run.report.seconds, 4)
               if run.report.completed and run.report.seconds else None, "created_at": datetime.now(timezone.utc)}
        con.execute(f"INSERT INTO bench_model_runs ({', '.join(row)}) VALUES ({', '.join('?' for _ in row)})", list(row.values()))
        catalog.describe(con)
        cells = breakdown(con, [run.run_id], "cell")
    return BenchResult(run.run_id, wid, version, len(subset), run.report.completed, run.report.skipped, seconds, cells)
