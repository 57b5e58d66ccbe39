"""Checkpoints and their lineage: where trained checkpoints live (``<data>/checkpoints/<version>/`` with an
``envsim_checkpoint.json`` manifest, ``LATEST`` pointing at the newest; a run in progress, or one stopped
before it finished, in ``.<version>.staging/``, where the next run of that version resumes), how a reference
resolves (a version, ``<version>/step-N``, ``latest`` or a path), and the DuckDB tables that tie checkpoints to
the mixture version they were trained on and evaluation runs to the checkpoint and split version they scored:
``sft_checkpoints``, ``sft_checkpoint_steps`` (intermediate checkpoints), ``eval_job_runs`` and the view
``checkpoint_scores`` (their columns: docs/gpu-jobs.md and the DuckDB comments, :mod:`pipeline.store.catalog`).

A served checkpoint's evaluation is cached by its **weights id** (:func:`weights_id`): the checkpoint
version of a checkpoint this pipeline trained, else a hash of its weight files (:func:`weights_fingerprint`)
— never by the name it is served under.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import duckdb

from pipeline.export.hf_layout import MARKER
from pipeline.store import catalog, tables, warehouse
from pipeline.store.layout import DataLayout, file_lock
from pipeline.training import steps
from pipeline.training.base_models import lineage
from pipeline.training.llamafactory import MANIFEST

_STEP_REF = re.compile(r"^(ckpt-[0-9a-f]+)/step-(\d+)$")


def export_version(export_dir: Path) -> tuple[str, str]:
    """(kind, version) of the split an export directory holds (its marker file)."""
    marker = export_dir / MARKER
    if not marker.exists():
        raise FileNotFoundError(f"{export_dir} holds no envsim export (no {MARKER}); materialize 'sft_dataset' first")
    held = json.loads(marker.read_text())
    return held["kind"], held["version"]


def staging_dir(data_root: Path, version: str) -> Path:
    """Where checkpoint version ``version`` trains until it is published: one directory per version, so that a
    run stopped before it finished (preempted, timed out, failed) is resumed by the next run of that version."""
    return DataLayout.at(data_root).checkpoints / f".{version}.staging"


@contextmanager
def training_lock(data_root: Path, version: str) -> Iterator[None]:
    """Held while a run of ``version`` trains: a second run of the same version at the same time (both would
    write one staging directory) fails at once."""
    try:
        with file_lock(DataLayout.at(data_root).checkpoints / ".locks" / f"{version}.lock", wait=False):
            yield
    except BlockingIOError:
        raise RuntimeError(
            f"checkpoint version {version} is being trained by another run right now; "
            "wait for it (or terminate it) before materializing it again"
        ) from None


def publish(staging: Path, final: Path, manifest: dict[str, Any]) -> Path:
    """Move a finished training run from ``staging`` to ``final`` (replacing an earlier run of the same
    version only now, after this one succeeded), write its manifest and point ``LATEST`` at it."""
    (staging / MANIFEST).write_text(json.dumps({**manifest, "path": str(final)}, indent=2, sort_keys=True, default=str))
    old = final.with_name(f".{final.name}.old-{os.getpid()}")
    if final.exists():
        os.replace(final, old)
    os.replace(staging, final)
    shutil.rmtree(old, ignore_errors=True)
    (final.parent / "LATEST").write_text(final.name + "\n")
    return final


def resolve(data_root: Path, ref: str) -> tuple[Path, dict[str, Any] | None]:
    """A checkpoint reference — ``latest``, a checkpoint version (``ckpt-…``) or a directory — as
    (directory, manifest or None for a checkpoint this pipeline did not train)."""
    root = DataLayout.at(data_root).checkpoints
    if step := _STEP_REF.match(ref):
        return _resolve_step(data_root, step.group(1), int(step.group(2)))
    if ref == "latest":
        pointer = root / "LATEST"
        if not pointer.exists():
            raise FileNotFoundError(f"no trained checkpoint under {root} yet; materialize 'sft_training' first")
        path = root / pointer.read_text().strip()
    elif ref.startswith("ckpt-") and (root / ref).is_dir():
        path = root / ref
    else:
        path = Path(ref)
    if not path.is_dir():
        raise FileNotFoundError(f"checkpoint {ref!r} not found (no directory {path})")
    return path.resolve(), read_manifest(path)


#: files that hold a checkpoint's weights (Hugging Face / PEFT / llama.cpp), at the top of its directory
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".gguf")
#: the sidecar file that caches each weight file's SHA-256, keyed by (name, size, mtime)
WEIGHTS_SIDECAR = ".envsim_weights.json"


def _file_sha256(path: Path) -> str:
    """SHA-256 of a file, streamed (a multi-GB shard is never held in memory)."""
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def weights_fingerprint(directory: Path) -> str:
    """SHA-256 over the weight files at the top of ``directory`` (``WEIGHT_SUFFIXES``; sub-directories such
    as intermediate ``checkpoint-N/`` saves are not the served weights): each file's name and content hash,
    in name order. Each file's hash is cached in ``WEIGHTS_SIDECAR`` keyed by (name, size, mtime), so an
    unchanged checkpoint is not read again; a directory that cannot be written just goes uncached. Raises
    FileNotFoundError when the directory holds no weight file."""
    files = sorted(p for p in directory.iterdir() if p.is_file() and p.name.endswith(WEIGHT_SUFFIXES))
    if not files:
        raise FileNotFoundError(
            f"{directory} holds no weight file ({', '.join(f'*{s}' for s in WEIGHT_SUFFIXES)}): "
            "cannot tell which weights it serves"
        )
    sidecar = directory / WEIGHTS_SIDECAR
    try:
        cached = json.loads(sidecar.read_text()).get("files", {})
    except (OSError, ValueError, AttributeError):
        cached = {}
    entries: dict[str, dict[str, Any]] = {}
    for path in files:
        stat = path.stat()
        known = cached.get(path.name)
        if isinstance(known, dict) and known.get("size") == stat.st_size and known.get("mtime_ns") == stat.st_mtime_ns:
            entries[path.name] = known
        else:
            entries[path.name] = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": _file_sha256(path)}
    if entries != cached:
        with suppress(OSError):
            sidecar.write_text(json.dumps({"files": entries}, indent=1, sort_keys=True))
    combined = hashlib.sha256()
    for name in sorted(entries):
        combined.update(f"{name}\0{entries[name]['sha256']}\n".encode())
    return combined.hexdigest()


def weights_id(directory: Path, manifest: dict[str, Any] | None) -> str:
    """The identity of the weights in a checkpoint directory: its checkpoint version (``ckpt-…``, from its
    manifest) when this pipeline trained it, else ``sha256-<16 hex>`` of :func:`weights_fingerprint`."""
    if manifest and manifest.get("checkpoint_version"):
        return str(manifest["checkpoint_version"])
    return f"sha256-{weights_fingerprint(directory)[:16]}"


def served_weights_id(directory: Path, manifest: dict[str, Any] | None, base_model: str | None = None) -> str:
    """The weights id of what is served from ``directory``: :func:`weights_id`; for a LoRA adapter served on
    ``base_model``, the adapter and its base together (``sha256-…`` of both ids; a base that is a local directory by its
    own weights id, else by its name) — unless it is the base the manifest's checkpoint version already names."""
    wid = weights_id(directory, manifest)
    if base_model is None or (manifest and (manifest.get("settings") or {}).get("model_name_or_path") == base_model):
        return wid
    base_dir = Path(base_model)
    base = weights_id(base_dir, read_manifest(base_dir)) if base_dir.is_dir() else base_model
    both = hashlib.sha256(f"{wid}\0{base}".encode()).hexdigest()
    return f"sha256-{both[:16]}"


def read_manifest(directory: Path) -> dict[str, Any] | None:
    """A checkpoint directory's ``envsim_checkpoint.json``, or None for a checkpoint trained elsewhere."""
    path = directory / MANIFEST
    return json.loads(path.read_text()) if path.exists() else None


def default_served_name(directory: Path, wid: str, manifest: dict[str, Any] | None) -> str:
    """The name a checkpoint is served under unless one is configured: its weights id — the checkpoint
    version — for a checkpoint this pipeline trained, else ``<directory name>-<weights id>`` (two
    checkpoints in directories of the same name get different names)."""
    return wid if manifest else f"{directory.name}-{wid}"


def chat_template(directory: Path, manifest: dict[str, Any] | None, given: str | None = None) -> str | None:
    """The chat template a checkpoint is served with: ``given`` (``serve.template``), else the one its manifest
    (or its training settings) names, else the one its base-model conversion recorded; None when none says."""
    return (
        given
        or (manifest or {}).get("template")
        or (manifest or {}).get("settings", {}).get("template")
        or (lineage(directory) or {}).get("template")
    )


#: ``eval_job_runs`` columns (all VARCHAR), in table order: its declaration (pipeline.store.tables)
EVAL_JOB_RUNS = tuple(tables.table("eval_job_runs").sql_columns)


def _resolve_step(data_root: Path, version: str, step: int) -> tuple[Path, dict[str, Any] | None]:
    """``<version>/step-N``: its ``checkpoint-N`` in the published run, else in the run still training; its
    manifest is its run's, with its own version and step."""
    for run_dir in (DataLayout.at(data_root).checkpoints / version, staging_dir(data_root, version)):
        path = run_dir / f"checkpoint-{step}"
        if path.is_dir():
            manifest_path = run_dir / MANIFEST
            run = json.loads((manifest_path if manifest_path.exists() else run_dir / steps.RUN_FILE).read_text())
            return path.resolve(), {
                **run,
                "checkpoint_version": steps.step_version(version, step),
                "parent_version": version,
                "step": step,
                "path": str(path.resolve()),
            }
    raise FileNotFoundError(
        f"checkpoint {version}/step-{step} not found: no checkpoint-{step} in {version} "
        "(rotated away by save_total_limit, or never written)"
    )


def _schema(con: duckdb.DuckDBPyConnection) -> None:
    for name in ("sft_checkpoints", "sft_checkpoint_steps", "eval_job_runs"):
        warehouse.ensure_table(con, name)


def _views(con: duckdb.DuckDBPyConnection) -> None:
    if con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'eval_runs'").fetchone()[0]:
        con.execute("""CREATE OR REPLACE VIEW checkpoint_scores AS
            SELECT c.mixture_version, j.checkpoint_version, j.served_model, j.template, j.backend, j.split_version,
                   c.train_loss, r.* EXCLUDE (simulator, model, split_version)
            FROM eval_job_runs j JOIN eval_runs r USING (run_id)
            LEFT JOIN sft_checkpoints c USING (checkpoint_version)
            WHERE j.checkpoint_version IS NOT NULL""")
    catalog.describe(con)


def record_checkpoint(con: duckdb.DuckDBPyConnection, manifest: dict[str, Any]) -> None:
    """Insert (or replace) a checkpoint version's row in ``sft_checkpoints``."""
    _schema(con)
    metrics = manifest.get("metrics") or {}
    con.execute("DELETE FROM sft_checkpoints WHERE checkpoint_version = ?", [manifest["checkpoint_version"]])
    versions = manifest.get("library_versions")
    row = {
        "checkpoint_version": manifest["checkpoint_version"],
        "mixture_version": manifest["mixture_version"],
        "base_model": manifest["settings"]["model_name_or_path"],
        "finetuning_type": manifest["settings"]["finetuning_type"],
        "template": manifest.get("template") or manifest["settings"]["template"],
        "gpus": manifest["gpus"],
        "settings_json": json.dumps(manifest["settings"], sort_keys=True),
        "path": manifest["path"],
        "train_loss": metrics.get("train_loss"),
        "train_runtime_s": metrics.get("train_runtime"),
        "tokens_seen": metrics.get("num_input_tokens_seen"),
        "job_id": manifest.get("job_id"),
        "dagster_run_id": manifest.get("dagster_run_id"),
        "nodes": manifest.get("nodes", 1),
        "base_model_revision": manifest.get("base_model_revision"),
        "library_versions_json": json.dumps(versions, sort_keys=True) if versions is not None else None,
    }
    con.execute(
        f"INSERT INTO sft_checkpoints ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})", list(row.values())
    )
    _views(con)


def record_steps(
    con: duckdb.DuckDBPyConnection,
    run_dir: Path,
    records: list[dict[str, Any]] | None = None,
    job_id: str | None = None,
    dagster_run_id: str | None = None,
) -> int:
    """Insert (or replace) the intermediate checkpoints of the run in ``run_dir`` in ``sft_checkpoint_steps``:
    ``records`` (e.g. one announced in the job's log), default all it recorded (:mod:`pipeline.training.steps`);
    the path is in ``run_dir`` and ``present`` says whether it is still there. Returns the rows written."""
    _schema(con)
    records = steps.read_steps(run_dir) if records is None else records
    for record in records:
        path = run_dir.resolve() / record["name"]
        con.execute("DELETE FROM sft_checkpoint_steps WHERE checkpoint_version = ?", [record["checkpoint_version"]])
        con.execute(
            "INSERT INTO sft_checkpoint_steps VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                record["checkpoint_version"],
                record["parent_version"],
                record["mixture_version"],
                record["step"],
                str(path),
                path.is_dir(),
                record.get("loss"),
                record.get("epoch"),
                record.get("written_at"),
                job_id,
                dagster_run_id,
            ],
        )
    return len(records)


def sync_checkpoints(con: duckdb.DuckDBPyConnection, data_root: Path) -> int:
    """Record every published checkpoint's manifest in ``sft_checkpoints``, and the intermediate checkpoints of
    every run, published or not, in ``sft_checkpoint_steps`` (``sft_training`` records its own when its job ends;
    the evaluation job calls this too). Returns the number of published checkpoints."""
    root = DataLayout.at(data_root).checkpoints
    manifests = sorted(root.glob(f"ckpt-*/{MANIFEST}"))
    for manifest in manifests:
        record_checkpoint(con, json.loads(manifest.read_text()))
    for run_file in sorted(root.glob(f"*/{steps.RUN_FILE}")):  # ckpt-* and .ckpt-*.staging alike
        record_steps(con, run_file.parent)
    return len(manifests)


def record_eval_runs(con: duckdb.DuckDBPyConnection, rows: list[dict[str, Any]]) -> None:
    """Insert (or replace) the lineage rows of evaluation runs in ``eval_job_runs`` (one per run_id; keys
    ``EVAL_JOB_RUNS``, of which ``run_id``, ``simulator`` and ``split_version`` are required)."""
    _schema(con)
    for row in rows:
        con.execute("DELETE FROM eval_job_runs WHERE run_id = ?", [row["run_id"]])
        con.execute(
            f"INSERT INTO eval_job_runs ({', '.join(EVAL_JOB_RUNS)}) VALUES ({', '.join('?' * len(EVAL_JOB_RUNS))})",
            [row[c] if c in ("run_id", "simulator", "split_version") else row.get(c) for c in EVAL_JOB_RUNS],
        )
    _views(con)
