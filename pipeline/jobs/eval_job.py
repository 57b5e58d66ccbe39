"""The evaluation job (``python -m pipeline.jobs.eval_job``), run by a launcher (local or Slurm).

It talks to Dagster only through Dagster Pipes: its parameters arrive as Pipes extras (data root, split
version, simulators, optional endpoint), and its scores per stratum and the paths of its per-sample
result files go back as a Pipes materialization. Optionally the job script serves a checkpoint with vLLM
first and points the simulators at it.
"""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from pipeline.evaluate.harness import evaluate, run_id
from pipeline.evaluate.simulators import SimulatorSpec, make_simulator
from pipeline.select.versions import BENCHMARK, SplitStore
from pipeline.store.layout import DataLayout

GROUPS = (("failure", lambda r: r["outcome"] == "failure"), ("no-change", lambda r: r["delta_size"] == 0),
          ("simple", lambda r: r["delta_size"] <= 2), ("medium", lambda r: r["delta_size"] <= 6), ("difficult", lambda r: True))


def _group(row: dict[str, Any]) -> str:
    return next(name for name, rule in GROUPS if rule(row))


def summarise(path: Path) -> dict[str, Any]:
    latest: dict[str, dict[str, Any]] = {}
    for line in path.read_text().splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        latest[row["step_id"]] = row
    rows = list(latest.values())
    by_group: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_group[_group(row)].append(row)

    def pct(items: list[dict[str, Any]], key: str) -> float:
        return round(100 * sum(bool(r[key]) for r in items) / len(items), 1) if items else 0.0

    return {"samples": len(rows), "fm": pct(rows, "fm"), "cm": pct(rows, "cm"), "cm_lenient": pct(rows, "cm_lenient"),
            "parse_failures": sum(not r["parse_ok"] for r in rows),
            "cm_by_group": {g: pct(items, "cm") for g, items in sorted(by_group.items())}}


def run(data_root: str, split_version: str | None, simulators: list[dict[str, Any]], base_url: str | None = None) -> dict[str, Any]:
    layout = DataLayout.at(data_root)
    store = SplitStore(layout, BENCHMARK)
    version = store.resolve(split_version)
    import pandas as pd

    samples = pd.read_parquet(store.samples(version)).to_dict("records")
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
        report["runs"][run_id(spec.name, version)] = {"results_path": str(path), **summarise(path)}
    return report


def main() -> None:
    from dagster_pipes import open_dagster_pipes

    with open_dagster_pipes() as pipes:
        extras = pipes.extras
        pipes.log.info(f"evaluating {[s['name'] for s in extras['simulators']]} on {extras.get('split_version') or 'CURRENT'}")
        report = run(extras["data_root"], extras.get("split_version"), extras["simulators"], extras.get("base_url"))
        for rid, summary in report["runs"].items():
            pipes.log.info(f"{rid}: CM {summary['cm']}% FM {summary['fm']}% over {summary['samples']} samples")
        pipes.report_asset_materialization(metadata={"report": {"raw_value": json.dumps(report), "type": "json"},
                                                     "split_version": report["split_version"]})


if __name__ == "__main__":
    main()
