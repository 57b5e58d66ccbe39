"""An evaluation job before and after it runs (no Dagster here; ``assets/training.py`` submits the job and reads
its report through Dagster Pipes): :func:`eval_extras` and :func:`eval_script` are what the job is given,
:func:`eval_lineage` what ``eval_job_runs`` records of each of its runs, :func:`record_eval` loads its results
into DuckDB and :func:`eval_facts` says what the ``simulator_eval_job`` asset reports."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from pipeline.evaluate import results
from pipeline.report.tables import Facts, Table
from pipeline.training import checkpoints
from pipeline.training.launchers import GPU_CHECK


def eval_extras(
    root: Path,
    split_version: str | None,
    simulators: list[dict[str, Any]],
    served: dict[str, Any] | None,
    workdir: Path,
    max_samples: int | None,
) -> dict[str, Any]:
    """What the evaluation job reads through Dagster Pipes (``assets/training_entry.py evaluate``)."""
    return {
        "data_root": str(root),
        "split_version": split_version,
        "simulators": simulators,
        "served": served,
        "workdir": str(workdir),
        "max_samples": max_samples,
    }


def eval_script(python: str, gpus: int) -> str:
    """The job's script: the GPU check when it asks for GPUs, then the evaluation with ``python``."""
    return (GPU_CHECK if gpus > 0 else "") + f"{shlex.quote(python)} -m assets.training_entry evaluate\n"


def eval_lineage(report: dict[str, Any], job_id: str, dagster_run_id: str) -> list[dict[str, Any]]:
    """A row of ``eval_job_runs`` per run of the job's ``report``: the served model's fields on its run only."""
    info = report.get("served") or {}
    served = ("served_model", "template", "backend", "checkpoint_path", "checkpoint_version")
    return [
        {
            "run_id": rid,
            "simulator": s["simulator"],
            "split_version": report["split_version"],
            "job_id": job_id,
            "dagster_run_id": dagster_run_id,
            "weights_id": s.get("weights_id"),
            **({k: info[k] for k in served} if rid == info.get("run_id") else {}),
        }
        for rid, s in report["runs"].items()
    ]


def record_eval(
    con: duckdb.DuckDBPyConnection, root: Path, report: dict[str, Any], job_id: str, dagster_run_id: str
) -> pd.DataFrame:
    """Load every run's per-sample scores into the evaluation tables, refresh the checkpoint tables and record
    the runs' lineage in ``eval_job_runs``; returns the runs' summary (``results.summary``)."""
    for rid, summary in report["runs"].items():
        results.load_run(con, Path(summary["results_path"]), rid)
    checkpoints.sync_checkpoints(con, root)
    checkpoints.record_eval_runs(con, eval_lineage(report, job_id, dagster_run_id))
    return results.summary(con, list(report["runs"]))


def eval_facts(report: dict[str, Any], job_id: str, summary: pd.DataFrame, manifest: dict[str, Any] | None) -> Facts:
    """What the ``simulator_eval_job`` asset reports: the runs' ``summary``, CM per group as the job computed it
    and, with a served checkpoint, what was served and how much of it was scored (its ``manifest``: the
    checkpoint and mixture versions it was trained as)."""
    groups = pd.DataFrame(
        [{"run": rid, "parse_failures": s["parse_failures"], **s["cm_by_group"]} for rid, s in report["runs"].items()]
    )
    values: dict[str, Any] = {
        "job_id": job_id,
        "split_version": report["split_version"],
        "samples": report["samples"],
        "summary": Table.of_frame(summary),
        "cm_by_group_from_job": Table.of_frame(groups),
    }
    if info := report.get("served"):
        run = report["runs"][info["run_id"]]
        values |= {k: info[k] for k in ("served_model", "weights_id", "template", "backend")}
        values |= {"checkpoint": Path(info["checkpoint_path"])}
        values |= {k: run[k] for k in ("scored", "resumed", "parse_failures")}
        if manifest:
            values |= {k: manifest[k] for k in ("checkpoint_version", "mixture_version")}
    return Facts(values)
