"""Score the GPU SFT experiment's answers (docs/evaluation.md "Measured on a GPU") with the
project's own harness: each model's answers file becomes a ``recorded`` simulator scored on the benchmark
version they were generated for, into ``data/eval/<version>/`` and the DuckDB ``eval_*`` tables; then the
tables (per cell, per |Δ| bucket) and the CM-by-|Δ| plot are written.

  .venv/bin/python benchmarks/gpu_sft/score.py RESULTS_DIR PLAN_JSON [--plot docs/gpu-sft-cm-by-delta.png]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
from pathlib import Path

from pipeline.core.strata import DELTA_BUCKETS, delta_bucket
from pipeline.evaluate.results import breakdown, load_run
from pipeline.evaluate.run import score_all
from pipeline.evaluate.samples import load_samples
from pipeline.evaluate.simulators import simulator_spec
from pipeline.report.plots import line_plot
from pipeline.store.duck import connect_file
from pipeline.store.layout import DataLayout

MODELS = ("base", "balance2", "uniform")


def weights_of(results: Path, model: str) -> str:
    """The base model's weights id is its GGUF's sha256; a trained model's (its weights stayed on the device)
    is a hash of its training config and training log."""
    if model == "base":
        return (
            "gguf-sha256-"
            + json.loads((results / "base_hf" / "envsim_base_model.json").read_text())["gguf_sha256"][:16]
        )
    h = hashlib.sha256((results / "ckpt" / model / "trainer_log.jsonl").read_bytes())
    return f"h100-sft-{model}-{h.hexdigest()[:12]}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", type=Path)
    ap.add_argument("plan", type=Path)
    ap.add_argument("--data-root", default=os.environ.get("ENVSIM_DATA_ROOT", "data"))
    ap.add_argument("--plot", type=Path, default=Path("docs/gpu-sft-cm-by-delta.png"))
    a = ap.parse_args()
    layout = DataLayout.at(a.data_root)
    plan = json.loads(a.plan.read_text())
    version, samples = load_samples(layout, plan["benchmark_version"])
    specs = [
        simulator_spec(
            name=f"smollm2-135m-{m}",
            kind="recorded",
            completions=str(a.results / f"answers-{m}.jsonl"),
            weights_id=weights_of(a.results, m),
            max_request_failure_share=1.0,
        )
        for m in MODELS
        if (a.results / f"answers-{m}.jsonl").exists()
    ]
    scored = score_all(layout, version, samples, specs)
    runs = [s.run_id for s in scored]
    with connect_file(layout.duckdb) as con:  # the views resolve against the data root
        for s in scored:
            load_run(con, s.path, s.run_id)
        answered_by_all = [
            r[0]
            for r in con.execute(
                "SELECT step_id FROM eval_results WHERE run_id IN (SELECT unnest(?)) AND request_error IS NULL "
                "GROUP BY step_id HAVING count(*) = ?",
                [runs, len(runs)],
            ).fetchall()
        ]
        out = {
            "benchmark_version": version,
            "runs": runs,
            "answered_by_all": len(answered_by_all),
            "cells": breakdown(con, runs, "cell").to_dict("records"),
            "delta": breakdown(con, runs, "delta_bucket").to_dict("records"),
            "delta_common": breakdown(con, runs, "delta_bucket", answered_by_all).to_dict("records"),
            "cells_common": breakdown(con, runs, "cell", answered_by_all).to_dict("records"),
        }
    (a.results / "scores.json").write_text(json.dumps(out, indent=1, default=str))
    order = [delta_bucket(d) for d in (0, 1, 3, 7, 13)] + [
        name for name, _ in DELTA_BUCKETS
    ]  # labels; roles in older results
    rows = [r for r in out["delta_common"] if r["delta_bucket"] != "all"]
    buckets = [b for b in order if any(r["delta_bucket"] == b for r in rows)] or sorted(
        {r["delta_bucket"] for r in rows}
    )

    def draw(ax) -> None:
        for run in runs:
            cm = {r["delta_bucket"]: r["cm"] for r in rows if r["run_id"] == run}
            ax.plot(
                range(len(buckets)), [cm.get(b) for b in buckets], marker="o", label=run.split("@")[0].split("+")[0]
            )
        ax.set_xticks(range(len(buckets)), buckets)

    line_plot(
        a.plot,
        draw,
        "|Δ| bucket",
        "CM (%)",
        f"SmolLM2-135M, CM by |Δ| ({len(answered_by_all)} samples all answered)",
        ylim=(0, 100),
    )
    print(json.dumps({k: out[k] for k in ("benchmark_version", "runs", "answered_by_all")}))
    for key in ("cells", "delta", "delta_common"):
        print(f"-- {key}")
        for r in out[key]:
            print(r)


if __name__ == "__main__":
    main()
