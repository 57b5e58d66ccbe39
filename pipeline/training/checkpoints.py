"""Checkpoints and their lineage: where trained checkpoints live (``<data>/checkpoints/<version>/`` with an
``envsim_checkpoint.json`` manifest, ``LATEST`` pointing at the newest), how a reference resolves
(a version, ``latest`` or a path), and the DuckDB tables that tie checkpoints to the mixture version they
were trained on and evaluation runs to the checkpoint and split version they scored:

* ``sft_checkpoints`` — one row per checkpoint version: mixture version, base model, template, settings,
  path, final training metrics;
* ``eval_job_runs`` — one row per evaluation run of ``simulator_eval_job``: served model name, checkpoint
  version and path, template, serving backend, split version (join ``eval_runs`` / ``eval_results`` on
  ``run_id``);
* view ``checkpoint_scores`` — mixture version → checkpoint → split version → FM / CM / parse failures.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import duckdb

from pipeline.export.hf_layout import MARKER
from pipeline.store.layout import DataLayout
from pipeline.training.llamafactory import MANIFEST


def export_version(export_dir: Path) -> tuple[str, str]:
    """(kind, version) of the split an export directory holds (its marker file)."""
    marker = export_dir / MARKER
    if not marker.exists():
        raise FileNotFoundError(f"{export_dir} holds no envsim export (no {MARKER}); materialize 'sft_dataset' first")
    held = json.loads(marker.read_text())
    return held["kind"], held["version"]


def checkpoints_root(data_root: Path) -> Path:
    return DataLayout.at(data_root).checkpoints


def publish(staging: Path, final: Path, manifest: dict[str, Any]) -> Path:
    """Move a finished training run from ``staging`` to ``final`` (replacing an earlier run of the same
    version only now, after this one succeeded), write its manifest and point ``LATEST`` at it."""
    (staging / MANIFEST).write_text(json.dumps({**manifest, "path": str(final)}, indent=2, sort_keys=True, default=str))
    old = final.with_name(f".{final.name}.old-{os.getpid()}")
    if final.exists():
        os.replace(final, old)
    os.replace(staging, final)
    if old.exists():
        import shutil

        shutil.rmtree(old, ignore_errors=True)
    latest = final.parent / "LATEST"
    latest.write_text(final.name + "\n")
    return final


def resolve(data_root: Path, ref: str) -> tuple[Path, dict[str, Any] | None]:
    """A checkpoint reference — ``latest``, a checkpoint version (``ckpt-…``) or a directory — as
    (directory, manifest or None for a checkpoint this pipeline did not train)."""
    root = checkpoints_root(data_root)
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
    manifest_path = path / MANIFEST
    return path.resolve(), json.loads(manifest_path.read_text()) if manifest_path.exists() else None


def _schema(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("""CREATE TABLE IF NOT EXISTS sft_checkpoints (
        checkpoint_version VARCHAR, mixture_version VARCHAR, base_model VARCHAR, finetuning_type VARCHAR,
        template VARCHAR, gpus INTEGER, settings_json VARCHAR, path VARCHAR, train_loss DOUBLE, train_runtime_s DOUBLE,
        tokens_seen BIGINT, job_id VARCHAR, dagster_run_id VARCHAR)""")
    con.execute("""CREATE TABLE IF NOT EXISTS eval_job_runs (
        run_id VARCHAR, simulator VARCHAR, served_model VARCHAR, checkpoint_version VARCHAR, checkpoint_path VARCHAR,
        template VARCHAR, backend VARCHAR, split_version VARCHAR, job_id VARCHAR, dagster_run_id VARCHAR)""")


def _views(con: duckdb.DuckDBPyConnection) -> None:
    has_runs = con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'eval_runs'").fetchone()[0]
    if has_runs:
        con.execute("""CREATE OR REPLACE VIEW checkpoint_scores AS
            SELECT c.mixture_version, j.checkpoint_version, j.served_model, j.template, j.backend, j.split_version,
                   c.train_loss, r.* EXCLUDE (simulator, model, split_version)
            FROM eval_job_runs j JOIN eval_runs r USING (run_id)
            LEFT JOIN sft_checkpoints c USING (checkpoint_version)
            WHERE j.checkpoint_version IS NOT NULL""")


def record_checkpoint(con: duckdb.DuckDBPyConnection, manifest: dict[str, Any]) -> None:
    """Insert (or replace) a checkpoint version's row in ``sft_checkpoints``."""
    _schema(con)
    metrics = manifest.get("metrics") or {}
    con.execute("DELETE FROM sft_checkpoints WHERE checkpoint_version = ?", [manifest["checkpoint_version"]])
    con.execute("INSERT INTO sft_checkpoints VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", [
        manifest["checkpoint_version"], manifest["mixture_version"], manifest["settings"]["model_name_or_path"],
        manifest["settings"]["finetuning_type"], manifest["settings"]["template"], manifest["gpus"],
        json.dumps(manifest["settings"], sort_keys=True), manifest["path"], metrics.get("train_loss"),
        metrics.get("train_runtime"), metrics.get("num_input_tokens_seen"), manifest.get("job_id"),
        manifest.get("dagster_run_id")])
    _views(con)


def sync_checkpoints(con: duckdb.DuckDBPyConnection, data_root: Path) -> int:
    """Record every published checkpoint's manifest in ``sft_checkpoints`` (training runs for hours, so
    its asset does not hold the DuckDB writer pool; the evaluation job, which does, calls this)."""
    count = 0
    for manifest in sorted(checkpoints_root(data_root).glob(f"ckpt-*/{MANIFEST}")):
        record_checkpoint(con, json.loads(manifest.read_text()))
        count += 1
    return count


def record_eval_runs(con: duckdb.DuckDBPyConnection, rows: list[dict[str, Any]]) -> None:
    """Insert (or replace) the lineage rows of evaluation runs in ``eval_job_runs`` (one per run_id)."""
    _schema(con)
    for row in rows:
        con.execute("DELETE FROM eval_job_runs WHERE run_id = ?", [row["run_id"]])
        con.execute("INSERT INTO eval_job_runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", [
            row["run_id"], row["simulator"], row.get("served_model"), row.get("checkpoint_version"),
            row.get("checkpoint_path"), row.get("template"), row.get("backend"), row["split_version"],
            row.get("job_id"), row.get("dagster_run_id")])
    _views(con)
