"""Entry points of the GPU jobs, run inside the job by the launcher (``python -m resources.job_entry``).

They are the Dagster Pipes side of a job: parameters arrive as Pipes extras, results go back as a Pipes
materialization. The work itself is in ``pipeline.jobs``.
"""

import json
import sys
from pathlib import Path

from dagster_pipes import open_dagster_pipes

from pipeline.jobs import eval_job


def evaluate() -> None:
    with open_dagster_pipes() as pipes:
        extras = pipes.extras
        pipes.log.info(f"evaluating {[s['name'] for s in extras['simulators']]} on {extras.get('split_version') or 'CURRENT'}")
        report = eval_job.run(extras["data_root"], extras.get("split_version"), extras["simulators"], extras.get("base_url"))
        for rid, summary in report["runs"].items():
            pipes.log.info(f"{rid}: CM {summary['cm']}% FM {summary['fm']}% over {summary['samples']} samples")
        pipes.report_asset_materialization(metadata={"report": {"raw_value": json.dumps(report), "type": "json"},
                                                     "split_version": report["split_version"]})


def train_report(output_dir: str) -> None:
    out = Path(output_dir)
    metrics = json.loads((out / "all_results.json").read_text()) if (out / "all_results.json").exists() else {}
    with open_dagster_pipes() as pipes:
        pipes.report_asset_materialization(metadata={"checkpoint": str(out), "metrics": {"raw_value": metrics, "type": "json"}})


if __name__ == "__main__":
    command, *args = sys.argv[1:] or ["evaluate"]
    {"evaluate": evaluate, "train-report": train_report}[command](*args)
