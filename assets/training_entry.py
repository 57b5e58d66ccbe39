"""Entry points of the GPU jobs, run inside the job by the launcher (``python -m assets.training_entry``): the Dagster
Pipes side of a job (extras in, a materialization out) and its only Dagster part, so it lives next to the assets that
launch it; the work itself is ``pipeline.training``."""

import json
import sys
from pathlib import Path

from dagster_pipes import open_dagster_pipes

from pipeline.training import eval_job
from pipeline.training.llamafactory import run_report


def evaluate() -> None:
    """Serve the checkpoint (when asked), score the simulators, report the summary through Pipes."""
    with open_dagster_pipes() as pipes:
        extras = pipes.extras
        served = extras.get("served")
        names = [s["name"] for s in extras["simulators"]] + (
            [served["spec"]["served_name"] or "the served checkpoint"] if served else []
        )
        pipes.log.info(f"evaluating {names} on {extras.get('split_version') or 'CURRENT'}")
        report = eval_job.run(
            extras["data_root"],
            extras.get("split_version"),
            extras["simulators"],
            served=extras.get("served"),
            workdir=extras.get("workdir"),
            max_samples=extras.get("max_samples"),
            log=pipes.log.info,
        )
        for rid, summary in report["runs"].items():
            pipes.log.info(
                f"{rid}: CM {summary['cm']}% FM {summary['fm']}% over {summary['samples']} samples, "
                f"{summary['parse_failures']} parse failures"
            )
        pipes.report_asset_materialization(
            metadata={
                "report": {"raw_value": json.dumps(report, default=str), "type": "json"},
                "split_version": report["split_version"],
            }
        )


def train_report(output_dir: str) -> None:
    """Report the finished training run (checkpoint path, final metrics, loss curve) through Pipes."""
    report = run_report(Path(output_dir))
    with open_dagster_pipes() as pipes:
        pipes.log.info(f"trained into {output_dir}: {json.dumps(report['metrics'])}")
        pipes.report_asset_materialization(
            metadata={"report": {"raw_value": json.dumps(report), "type": "json"}, "checkpoint": report["checkpoint"]}
        )


if __name__ == "__main__":
    command, *args = sys.argv[1:] or ["evaluate"]
    {"evaluate": evaluate, "train-report": train_report}[command](*args)
