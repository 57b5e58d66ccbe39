"""Stratify → benchmark selection → SFT mixture → export on synthetic corpora of 10K / 100K / 1M steps,
each stage in its own process (wall time and that process's peak RSS), next to a naive baseline
written the way the reference scripts work (benchmarks/naive_reference.py).

    python benchmarks/bench_scale.py --steps 10000 [--naive] [--workdir /tmp/envsim-scale]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PIPELINE_STAGES = {
    "stratify": "from pipeline.select.stratify import stratify; stratify(L)",
    "benchmark": "from pipeline.select.selection import build_benchmark; build_benchmark(L, seed=0, on_shortfall='warn')",
    "mixture": "from pipeline.select.selection import build_mixture; build_mixture(L, seed=0, on_shortfall='warn')",
    "export": ("from pipeline.export.hf_layout import export_split; "
               "export_split(L, 'benchmark', None, L.root / 'export/benchmark'); export_split(L, 'sft_mixture', None, L.root / 'export/sft')"),
}


def measure(cmd: list[str]) -> tuple[float, float]:
    """(seconds, peak RSS MiB) of one child process."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd[:4])} failed with {proc.returncode}")
    return time.perf_counter() - start, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--naive", action="store_true", help="also run the naive baseline (slow, memory-hungry)")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/envsim-scale"))
    args = parser.parse_args()
    corpus = args.workdir / f"corpus-{args.steps}"
    if not (corpus / "trajectories" / "trajectories.parquet").exists():
        secs, _ = measure([sys.executable, "benchmarks/synth_corpus.py", str(corpus), "--steps", str(args.steps)])
        print(f"generated {args.steps} steps in {secs:.1f}s")
    print(f"== pipeline, {args.steps} steps ==")
    total = peak = 0.0
    for stage, code in PIPELINE_STAGES.items():
        script = f"import sys; sys.path.insert(0, {str(ROOT)!r}); from pipeline.store.layout import DataLayout; L = DataLayout.at({str(corpus)!r}); {code}"
        secs, rss = measure([sys.executable, "-c", script])
        total, peak = total + secs, max(peak, rss)
        print(f"  {stage:10s} {secs:8.2f}s  peak RSS {rss:7.0f} MiB")
    print(f"  {'total':10s} {total:8.2f}s  peak RSS {peak:7.0f} MiB")
    if args.naive:
        ref = args.workdir / f"naive-{args.steps}"
        ref.mkdir(parents=True, exist_ok=True)
        if not (ref / "input.json").exists():
            measure([sys.executable, "benchmarks/naive_reference.py", "convert", str(corpus), str(ref / "input.json")])
        print(f"== naive baseline, {args.steps} steps ==")
        stages = [("stratify", ["input.json", "strata.json"]), ("select", ["strata.json", "bench.json"]),
                  ("mixture", ["strata.json", "bench.json", "sft.json"]), ("export", ["sft.json", "sft.parquet"])]
        ntotal = npeak = 0.0
        for stage, files in stages:
            secs, rss = measure([sys.executable, "benchmarks/naive_reference.py", stage, *[str(ref / f) for f in files]])
            ntotal, npeak = ntotal + secs, max(npeak, rss)
            print(f"  {stage:10s} {secs:8.2f}s  peak RSS {rss:7.0f} MiB")
        print(f"  {'total':10s} {ntotal:8.2f}s  peak RSS {npeak:7.0f} MiB")
        print(f"== pipeline is {ntotal / total:.1f}x faster with {100 * peak / npeak:.0f}% of the naive peak memory ==")


if __name__ == "__main__":
    main()
