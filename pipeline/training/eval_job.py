"""What the evaluation job computes (no Dagster here): optionally serve a checkpoint behind an
OpenAI-compatible endpoint, score simulators on a split version with the harness, write the per-sample
result files, and summarise them. ``assets/training_entry.py`` runs it inside a job and reports through
Dagster Pipes."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from pipeline.evaluate import results
from pipeline.evaluate.run import Scored, score_all
from pipeline.evaluate.samples import load_samples
from pipeline.evaluate.simulators import SimulatorSpec
from pipeline.store.layout import DataLayout
from pipeline.training.serve import ServeSpec, serve


def _summary(scored: Scored) -> dict[str, Any]:
    return {"results_path": str(scored.path), "simulator": scored.spec.name, "model": scored.spec.model,
            **results.run_summary(scored.path, scored.run_id)}


def run(data_root: str, split_version: str | None, simulators: list[dict[str, Any]],
        served: dict[str, Any] | None = None, workdir: str | None = None, max_samples: int | None = None,
        log: Callable[[str], None] = print) -> dict[str, Any]:
    """Score ``simulators`` on a benchmark version with the evaluation loop
    (:func:`pipeline.evaluate.run.score_all`); with ``served`` (``{"spec": ServeSpec fields,
    "simulator": SimulatorSpec fields}``) also start that server and score the model behind it.
    ``max_samples`` scores only the first N samples in the split's pick order. A simulator whose
    requests mostly failed raises :class:`pipeline.evaluate.harness.MostRequestsFailed` (its results
    file already written: a re-run asks only the failed samples)."""
    layout = DataLayout.at(data_root)
    version, samples = load_samples(layout, split_version, max_samples=max_samples)
    report: dict[str, Any] = {"split_version": version, "samples": len(samples), "runs": {}, "served": None}

    def scored(run: Scored) -> None:
        log(run.line())
        report["runs"][run.run_id] = _summary(run)

    score_all(layout, version, samples, [SimulatorSpec(**raw) for raw in simulators], scored, keep_going=False)
    if served:
        spec = ServeSpec(**served["spec"])
        with serve(spec, Path(workdir or layout.jobs) / "server", log) as endpoint:
            sim = {**served["simulator"], "kind": "openai", "model": spec.served_name, "base_url": endpoint.base_url}
            [run] = score_all(layout, version, samples, [SimulatorSpec(**sim)], scored, keep_going=False)
        report["runs"][run.run_id]["served"] = True
        report["served"] = {"run_id": run.run_id, "served_model": spec.served_name, "template": spec.template,
                            "backend": endpoint.backend, "model_name_or_path": spec.model_name_or_path,
                            "adapter_name_or_path": spec.adapter_name_or_path, "server_log": str(endpoint.log)}
    return report
