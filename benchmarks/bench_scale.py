"""Stratify → benchmark selection → SFT mixture → export on synthetic corpora (10K / 100K / 1M steps),
next to a naive baseline written the way the reference scripts work (benchmarks/naive_reference.py),
in one run on one machine.

Every stage runs in its own fresh process (as a Dagster multiprocess step would): the table shows
the stage's own wall time (measured inside the process, around the call), the process start-up
(interpreter + imports: numpy, pandas and pyarrow for both sides, as any Dagster step process has
them loaded) separately, the process's peak RSS (``wait4``; includes the interpreter and the shared
code of every imported library) and its peak private memory (RssAnon, sampled every 2 ms: the
data the stage holds).

    python benchmarks/bench_scale.py --steps 10000 [--naive] [--repeat 3] [--workdir /tmp/envsim-scale]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: written into a corpus directory once its generation finished (a corpus without it is generated again)
COMPLETE = ".complete"

PIPELINE_STAGES = {
    "stratify": ("from pipeline.select.stratify import stratify", "stratify(L)"),
    "benchmark": (
        "from pipeline.select.selection import build_benchmark",
        "build_benchmark(L, seed=0, on_shortfall='warn')",
    ),
    "mixture": ("from pipeline.select.selection import build_mixture", "build_mixture(L, seed=0, on_shortfall='warn')"),
    "export": (
        "from pipeline.export.hf_layout import export_split",
        "export_split(L, 'benchmark', None, L.root / 'export/benchmark'); "
        "export_split(L, 'sft_mixture', None, L.root / 'export/sft')",
    ),
}
# naive stage -> the reference-style scripts it runs (each its own process), with their files
NAIVE_STAGES = {
    "stratify": [("delete_error", ["input.json", "clean.json"]), ("label", ["clean.json", "labeled.json"])],
    "benchmark": [("select", ["labeled.json", "bench.json"])],
    "mixture": [("mixture", ["labeled.json", "bench.json", "sft.json"])],
    "export": [("export", ["bench.json", "sft.json", "export"])],
}
CHILD = """
import json, sys, time
t0 = time.perf_counter()
sys.path.insert(0, {root!r})
{preload}
import numpy, pandas, pyarrow, pyarrow.compute, pyarrow.parquet  # what a Dagster step process has loaded anyway
{imports}
t1 = time.perf_counter()
{call}
t2 = time.perf_counter()
print("@@" + json.dumps({{"startup": t1 - t0, "seconds": t2 - t1}}))
"""


def _private_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


Measure = tuple[float, float, float, float]  # stage seconds, start-up seconds, peak RSS MiB, peak private MiB


def run_child(imports: str, call: str, env: dict[str, str] | None = None) -> Measure:
    """One fresh process: stage seconds, start-up seconds, peak RSS (wait4) and peak private memory (sampled
    every 2 ms from /proc/PID/status RssAnon by this process), in MiB."""
    # a Dagster step process loads the code location first, which calls prepare_process() before pyarrow loads
    preload = "from pipeline.core.settings import prepare_process; prepare_process()" if "pipeline" in imports else ""
    code = CHILD.format(root=str(ROOT), imports=imports, call=call, preload=preload)
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True, env={**os.environ, **(env or {})}
    )
    anon = 0
    while True:  # private (anonymous) memory: the data a stage holds, not shared library code
        anon = max(anon, _private_kib(proc.pid))
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        time.sleep(0.002)
    proc.returncode = os.waitstatus_to_exitcode(status)
    out = proc.stdout.read() if proc.stdout else ""
    wall = time.perf_counter() - start
    if proc.returncode:
        raise SystemExit(f"stage failed ({call[:60]}…)")
    report = json.loads(next(line[2:] for line in out.splitlines() if line.startswith("@@")))
    return report["seconds"], max(report["startup"], wall - report["seconds"]), usage.ru_maxrss / 1024, anon / 1024


def ensure_corpus(steps: int, workdir: Path) -> Path:
    corpus = workdir / f"corpus-{steps}"
    done = corpus / COMPLETE
    if not done.exists():
        shutil.rmtree(corpus, ignore_errors=True)
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, str(ROOT / "benchmarks/synth_corpus.py"), str(corpus), "--steps", str(steps)], check=True
        )
        seconds = time.perf_counter() - t0
        done.write_text(json.dumps({"steps": steps, "seconds": round(seconds, 1)}))
        print(f"generated {steps} steps in {seconds:.1f}s ({steps / seconds:,.0f} steps/s)")
    for derived in ("strata", "splits", "export"):
        shutil.rmtree(corpus / derived, ignore_errors=True)
    return corpus


def bench_pipeline(corpus: Path, repeat: int) -> dict[str, Measure]:
    """The chain ``repeat`` times from scratch; per stage the median seconds and the highest memory."""
    runs: dict[str, list[Measure]] = {stage: [] for stage in PIPELINE_STAGES}
    for _ in range(repeat):
        for derived in ("strata", "splits", "export"):
            shutil.rmtree(corpus / derived, ignore_errors=True)
        for stage, (imports, call) in PIPELINE_STAGES.items():
            runs[stage].append(
                run_child(
                    f"from pipeline.store.layout import DataLayout\n{imports}\nL = DataLayout.at({str(corpus)!r})", call
                )
            )
    out = {}
    for stage, measures in runs.items():
        secs, startup, _, _ = sorted(measures)[len(measures) // 2]
        out[stage] = (secs, startup, max(m[2] for m in measures), max(m[3] for m in measures))  # worst memory
    return out


def bench_naive(corpus: Path, workdir: Path) -> dict[str, Measure]:
    ref = workdir / f"naive-{corpus.name.split('-')[-1]}"
    ref.mkdir(parents=True, exist_ok=True)
    if not (ref / "input.json").exists():
        run_child(
            "import naive_reference as n",
            f"n.to_reference_format(n.Path({str(corpus)!r}), n.Path({str(ref / 'input.json')!r}))",
            {"PYTHONPATH": str(ROOT / "benchmarks")},
        )
    out = {}
    for stage, scripts in NAIVE_STAGES.items():
        secs = startup = peak = anon = 0.0
        for script, files in scripts:
            paths = ", ".join(f"n.Path({str(ref / f)!r})" for f in files)
            s, u, m, a = run_child(
                "import naive_reference as n",
                f"n.STAGES[{script!r}]({paths})",
                {"PYTHONPATH": str(ROOT / "benchmarks")},
            )
            secs, startup, peak, anon = secs + s, startup + u, max(peak, m), max(anon, a)
        out[stage] = (secs, startup, peak, anon)
    return out


def table(title: str, rows: dict[str, Measure]) -> Measure:
    print(f"== {title} ==")
    print(f"  {'stage':10s} {'seconds':>9s} {'start-up':>9s} {'peak RSS':>12s} {'peak private':>14s}")
    for stage, (secs, startup, peak, anon) in rows.items():
        print(f"  {stage:10s} {secs:9.2f} {startup:9.2f} {peak:8.0f} MiB {anon:10.0f} MiB")
    total = sum(r[0] for r in rows.values())
    startup = sum(r[1] for r in rows.values())
    peak = max(r[2] for r in rows.values())
    anon = max(r[3] for r in rows.values())
    print(
        f"  {'total':10s} {total:9.2f} {startup:9.2f} {peak:8.0f} MiB {anon:10.0f} MiB   (with start-up: "
        f"{total + startup:.2f} s)"
    )
    return total, startup, peak, anon


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--naive", action="store_true", help="also run the naive baseline (slow, memory-hungry)")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/envsim-scale"))
    parser.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="pipeline chain runs; each stage reports its median seconds and its highest memory",
    )
    args = parser.parse_args()
    corpus = ensure_corpus(args.steps, args.workdir)
    print(
        f"corpus: {args.steps} steps, {sum(f.stat().st_size for f in corpus.rglob('*.parquet')) / 2**20:.0f} MiB "
        "of Parquet, "
        f"{os.cpu_count()} CPUs"
    )
    total, startup, peak, anon = table(
        f"pipeline, {args.steps} steps (per stage: median seconds, highest memory of {args.repeat} runs)",
        bench_pipeline(corpus, args.repeat),
    )
    if args.naive:
        ntotal, nstartup, npeak, nanon = table(
            f"naive reference-style baseline, {args.steps} steps", bench_naive(corpus, args.workdir)
        )
        print(
            f"== pipeline: {ntotal / total:.1f}x faster ({(ntotal + nstartup) / (total + startup):.1f}x counting "
            "process "
            f"start-up); peak RSS {100 * peak / npeak:.1f}% and peak private memory {100 * anon / nanon:.1f}% of "
            "the naive ones =="
        )


if __name__ == "__main__":
    main()
