"""What the evaluation job computes (no Dagster here): score simulators on a split version, write the
per-sample result files, and summarise them. ``resources/job_entry.py`` runs it inside a job and reports
through Dagster Pipes."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import duckdb

from pipeline.evaluate import results
from pipeline.evaluate.harness import evaluate, run_id
from pipeline.evaluate.simulators import SimulatorSpec, make_simulator
from pipeline.evaluate.samples import load_samples
from pipeline.store.layout import DataLayout

def summarise(path: Path, rid: str) -> dict[str, Any]:
    """Overall FM / CM / cm_reference / fm_reference / cm_changed_paths and CM per group of one run's result file (the same SQL as the
    in-process evaluation, on an in-memory DuckDB)."""
    con = duckdb.connect()
    results.load_run(con, path, rid)
    overall = con.execute("SELECT samples, fm, cm, cm_changed_paths, cm_reference, fm_reference FROM eval_runs WHERE run_id = ?",
                          [rid]).fetchone()
    groups = dict(con.execute("SELECT grp, cm FROM eval_by_stratum WHERE run_id = ?", [rid]).fetchall())
    parse_failures = con.execute("SELECT count(*) FILTER (NOT parse_ok) FROM eval_results WHERE run_id = ?", [rid]).fetchone()[0]
    return {"samples": overall[0], "fm": overall[1], "cm": overall[2], "cm_changed_paths": overall[3],
            "cm_reference": overall[4], "fm_reference": overall[5],
            "parse_failures": parse_failures, "cm_by_group": groups}


def run(data_root: str, split_version: str | None, simulators: list[dict[str, Any]], base_url: str | None = None) -> dict[str, Any]:
    layout = DataLayout.at(data_root)
    version, samples = load_samples(layout, split_version)  # with env_code for the envsimbench prompt
    report: dict[str, Any] = {"split_version": version, "runs": {}}
    for raw in simulators:
        spec = SimulatorSpec(**{**raw, **({"base_url": base_url} if base_url and raw.get("kind", "openai") == "openai" else {})})
        path = layout.root / "eval" / version / f"{spec.name}.jsonl"
        simulator = make_simulator(spec)

        async def go() -> None:
            try:
                await evaluate(samples, simulator, version, path)
            finally:
                await simulator.aclose()

        asyncio.run(go())
        rid = run_id(spec.name, version)
        report["runs"][rid] = {"results_path": str(path), **summarise(path, rid)}
    return report
