"""What the evaluation job computes (no Dagster here): optionally serve a checkpoint behind an
OpenAI-compatible endpoint, score simulators on a split version with the harness, write the per-sample
result files, and summarise them. ``pipeline/training/entry.py`` runs it inside a job and reports through
Dagster Pipes."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Callable

import duckdb

from pipeline.evaluate import results
from pipeline.evaluate.harness import evaluate, run_id
from pipeline.evaluate.simulators import SimulatorSpec, make_simulator
from pipeline.training.serve import ServeSpec, serve
from pipeline.store.versions import BENCHMARK, SplitStore
from pipeline.store.layout import DataLayout


def summarise(path: Path, rid: str) -> dict[str, Any]:
    """The run's ``eval_runs`` row (samples, FM, CM and the other metrics, request errors), its parse
    failures and CM per group, from its result file (the same SQL as the in-process evaluation, on an
    in-memory DuckDB)."""
    con = duckdb.connect()
    results.load_run(con, path, rid)
    cur = con.execute("SELECT * EXCLUDE (run_id, simulator, model, split_version) FROM eval_runs WHERE run_id = ?", [rid])
    overall = dict(zip([d[0] for d in cur.description], cur.fetchone()))
    groups = dict(con.execute("SELECT grp, cm FROM eval_by_stratum WHERE run_id = ?", [rid]).fetchall())
    parse_failures = con.execute("SELECT count(*) FILTER (NOT parse_ok) FROM eval_results WHERE run_id = ?", [rid]).fetchone()[0]
    return {**overall, "parse_failures": parse_failures, "cm_by_group": groups}


def _score(layout: DataLayout, version: str, samples: list[dict[str, Any]], raw: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    spec = SimulatorSpec(**raw)
    path = layout.eval_results(version, spec.name)  # both names checked (safe_name)
    simulator = make_simulator(spec)

    async def go() -> None:
        try:
            await evaluate(samples, simulator, version, path)
        finally:
            await simulator.aclose()

    asyncio.run(go())
    rid = run_id(spec.name, version)
    return rid, {"results_path": str(path), "simulator": spec.name, "model": spec.model, **summarise(path, rid)}


def run(data_root: str, split_version: str | None, simulators: list[dict[str, Any]],
        served: dict[str, Any] | None = None, workdir: str | None = None, max_samples: int | None = None,
        log: Callable[[str], None] = print) -> dict[str, Any]:
    """Score ``simulators`` on a benchmark version; with ``served`` (``{"spec": ServeSpec fields,
    "simulator": SimulatorSpec fields}``) also start that server and score the model behind it.
    ``max_samples`` scores only the first N samples in the split's pick order. A simulator whose
    requests mostly failed raises :class:`pipeline.evaluate.harness.MostRequestsFailed` (its results
    file already written: a re-run asks only the failed samples)."""
    layout = DataLayout.at(data_root)
    store = SplitStore(layout, BENCHMARK)
    version = store.resolve(split_version)
    import pandas as pd

    frame = pd.read_parquet(store.samples(version))
    if max_samples is not None:
        frame = frame.sort_values("position").head(max_samples)
    samples = frame.to_dict("records")
    report: dict[str, Any] = {"split_version": version, "samples": len(samples), "runs": {}, "served": None}
    for raw in simulators:
        rid, summary = _score(layout, version, samples, raw)
        report["runs"][rid] = summary
    if served:
        spec = ServeSpec(**served["spec"])
        with serve(spec, Path(workdir or layout.root / "jobs") / "server", log) as endpoint:
            sim = {**served["simulator"], "kind": "openai", "model": spec.served_name, "base_url": endpoint.base_url}
            rid, summary = _score(layout, version, samples, sim)
        report["runs"][rid] = {**summary, "served": True}
        report["served"] = {"run_id": rid, "served_model": spec.served_name, "template": spec.template,
                            "backend": endpoint.backend, "model_name_or_path": spec.model_name_or_path,
                            "adapter_name_or_path": spec.adapter_name_or_path, "server_log": str(endpoint.log)}
    return report
