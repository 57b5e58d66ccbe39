"""What the evaluation job computes (no Dagster here): optionally serve a checkpoint behind an OpenAI-compatible
endpoint, score simulators on a split version with the harness, write the per-sample result files, and summarise them.
``assets/training_entry.py`` runs it inside a job and reports through Dagster Pipes.

A served checkpoint is scored under its weights id (:func:`pipeline.training.checkpoints.weights_id`: its checkpoint
version, else a hash of its weight files), so its results are cached by the weights, never by the name it is served
under: another checkpoint served under the same name is scored in full."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline.core.progress import Log
from pipeline.evaluate import results
from pipeline.evaluate.run import Scored, score_all
from pipeline.evaluate.samples import load_samples
from pipeline.evaluate.simulators import simulator_spec
from pipeline.store.layout import DataLayout
from pipeline.training import checkpoints
from pipeline.training.serve import ServeSpec, serve


def _summary(scored: Scored) -> dict[str, Any]:
    """A run's entry in the job's report: where its results are, who answered, how many samples were scored
    now and how many were resumed from earlier runs of the same weights, and its metrics."""
    return {
        "results_path": str(scored.path),
        "simulator": scored.spec.name,
        "model": scored.spec.model,
        "weights_id": scored.spec.weights_id,
        "scored": scored.report.completed,
        "resumed": scored.report.skipped,
        **results.run_summary(scored.path, scored.run_id),
    }


def run(
    data_root: str,
    split_version: str | None,
    simulators: list[dict[str, Any]],
    served: dict[str, Any] | None = None,
    workdir: str | None = None,
    max_samples: int | None = None,
    log: Log = print,
) -> dict[str, Any]:
    """Score ``simulators`` on a benchmark version with the evaluation loop (:func:`pipeline.evaluate.run.score_all`);
    with ``served`` (``{"spec": ServeSpec fields, "simulator": SimulatorSpec fields, "checkpoint_path": the checkpoint
    directory}``) also start that server and score the model behind it under the checkpoint's weights id
    (:func:`pipeline.training.checkpoints.served_weights_id`); an empty ``served_name`` is
    :func:`pipeline.training.checkpoints.default_served_name`. ``max_samples`` scores only N samples taken across the
    strata (:func:`pipeline.evaluate.samples.load_samples`). A simulator whose requests mostly failed raises
    :class:`pipeline.evaluate.harness.MostRequestsFailed` (its results file already written: a re-run asks only the
    failed samples)."""
    layout = DataLayout.at(data_root)
    version, samples = load_samples(layout, split_version, max_samples=max_samples)
    report: dict[str, Any] = {"split_version": version, "samples": len(samples), "runs": {}, "served": None}

    def scored(run: Scored) -> None:
        log(run.line())
        report["runs"][run.run_id] = _summary(run)

    score_all(layout, version, samples, [simulator_spec(**raw) for raw in simulators], scored, keep_going=False)
    if served:
        path = Path(served["checkpoint_path"])
        manifest = checkpoints.read_manifest(path)
        lora_base = served["spec"]["model_name_or_path"] if served["spec"].get("adapter_name_or_path") else None
        wid = checkpoints.served_weights_id(path, manifest, lora_base)
        name = served["spec"].get("served_name") or checkpoints.default_served_name(path, wid, manifest)
        spec = ServeSpec(**{**served["spec"], "served_name": name})
        log(f"checkpoint {path}: weights {wid}")
        with serve(spec, Path(workdir or layout.jobs) / "server", log) as endpoint:
            sim = {
                **served["simulator"],
                "name": name,
                "kind": "openai",
                "model": name,
                "base_url": endpoint.base_url,
                "api_key_env": "",
                "weights_id": wid,
            }
            [run] = score_all(layout, version, samples, [simulator_spec(**sim)], scored, keep_going=False)
        report["runs"][run.run_id]["served"] = True
        report["served"] = {
            "run_id": run.run_id,
            "served_model": name,
            "weights_id": wid,
            "checkpoint_path": str(path),
            "checkpoint_version": (manifest or {}).get("checkpoint_version"),
            "template": spec.template,
            "backend": endpoint.backend,
            "model_name_or_path": spec.model_name_or_path,
            "adapter_name_or_path": spec.adapter_name_or_path,
            "server_log": str(endpoint.log),
        }
    return report
