"""Stratify → benchmark selection → SFT mixture → export on synthetic corpora (10K to 10M steps), through the
bare stage functions and through the Dagster assets a user materializes, next to a naive baseline written the way
the reference scripts work (benchmarks/naive_reference.py), in one run on one machine.

Functions: every stage runs in its own fresh process (as a Dagster multiprocess step would): the table shows
the stage's own wall time (measured inside the process, around the call), the process start-up
(interpreter + imports: numpy, pandas and pyarrow for both sides, as any Dagster step process has
them loaded) separately, the process's peak RSS (``wait4``; includes the interpreter and the shared
code of every imported library) and its peak private memory (RssAnon, sampled every 2 ms: the
data the stage holds).

Assets (``--assets``, the default from 1M steps): the same corpus root materialized through the code location's
definitions — ``step_strata`` (with the DuckDB views), ``benchmark_split``, ``sft_mixture``, ``benchmark_dataset``,
``sft_dataset`` and every check of them — in one process with the in-process executor (what ``./forge run`` and
``dg launch`` use) on a temporary Dagster instance: each step's time from Dagster's step statistics, the run's wall
time, the process's peak RSS and private memory.

    python benchmarks/bench_scale.py --steps 10000 [1000000 3000000 ...] [--naive] [--repeat 3] [--assets|--no-assets]
        [--workdir /tmp/envsim-scale] [--keep]

Each size's numbers also go to ``<workdir>/results-<steps>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
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


#: stage seconds, start-up seconds, peak RSS MiB, peak private MiB, CPU seconds of the process (user + system, start-up
#: included: what the other sessions' load on a shared machine disturbs least)
Measure = tuple[float, float, float, float, float]


def run_child(imports: str, call: str, env: dict[str, str] | None = None) -> Measure:
    """One fresh process: stage seconds, start-up seconds, peak RSS (wait4) and peak private memory (sampled
    every 2 ms from /proc/PID/status RssAnon by this process), in MiB."""
    # a Dagster step process loads the code location first, which calls prepare_process() before pyarrow loads
    preload = "from pipeline.core.settings import prepare_process; prepare_process()" if "pipeline" in imports else ""
    code = CHILD.format(root=str(ROOT), imports=imports, call=call, preload=preload)
    measure, _ = run_code(code, env)
    return measure


def run_code(code: str, env: dict[str, str] | None = None, stderr: Path | None = None) -> tuple[Measure, dict]:
    """Run ``code`` in a fresh interpreter that prints one ``@@{json}`` line with ``startup`` and ``seconds``;
    the measure (stage seconds, start-up, peak RSS, peak private memory) and that report."""
    start = time.perf_counter()
    err = open(stderr, "w") if stderr else None
    # stdout to a file, never a pipe read at the end: a long DuckDB query draws its progress bar there, and a
    # full pipe would stop the child
    out_file = tempfile.TemporaryFile("w+")
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=ROOT,
        stdout=out_file,
        stderr=err,
        text=True,
        env={**os.environ, **(env or {})},
    )
    anon = 0
    while True:  # private (anonymous) memory: the data a stage holds, not shared library code
        anon = max(anon, _private_kib(proc.pid))
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        time.sleep(0.002)
    proc.returncode = os.waitstatus_to_exitcode(status)
    out_file.seek(0)
    out = out_file.read()
    out_file.close()
    if err:
        err.close()
    wall = time.perf_counter() - start
    if proc.returncode:
        raise SystemExit(f"stage failed ({code.strip().splitlines()[-2][:80]}…){f': see {stderr}' if stderr else ''}")
    report = json.loads(next(line[2:] for line in out.splitlines() if line.startswith("@@")))
    secs = report["seconds"]
    cpu = usage.ru_utime + usage.ru_stime
    return (secs, max(report["startup"], wall - secs), usage.ru_maxrss / 1024, anon / 1024, cpu), report


def ensure_corpus(steps: int, workdir: Path) -> Path:
    corpus = workdir / f"corpus-{steps}"
    done = corpus / COMPLETE
    if not done.exists():
        shutil.rmtree(corpus, ignore_errors=True)
        t0, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(
            [sys.executable, str(ROOT / "benchmarks/synth_corpus.py"), str(corpus), "--steps", str(steps)], check=True
        )
        seconds, after = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        done.write_text(json.dumps({"steps": steps, "seconds": round(seconds, 1), "cpu_seconds": round(cpu, 1)}))
        print(
            f"generated {steps} steps in {seconds:.1f}s ({steps / seconds:,.0f} steps/s; {cpu:.1f} CPU-s, load "
            f"{os.getloadavg()[0]:.1f})",
            flush=True,
        )
    for derived in ("strata", "splits", "export"):
        shutil.rmtree(corpus / derived, ignore_errors=True)
    return corpus


def bench_pipeline(corpus: Path, repeat: int) -> dict[str, Measure]:
    """The chain ``repeat`` times from scratch; per stage the median seconds and the highest memory."""
    runs: dict[str, list[Measure]] = {stage: [] for stage in PIPELINE_STAGES}
    for attempt in range(repeat):
        clear_derived(corpus)
        for stage, (imports, call) in PIPELINE_STAGES.items():
            runs[stage].append(
                run_child(
                    f"from pipeline.store.layout import DataLayout\n{imports}\nL = DataLayout.at({str(corpus)!r})", call
                )
            )
            secs, startup, peak, anon, cpu = runs[stage][-1]
            print(
                f"  [{attempt + 1}/{repeat}] {stage:10s} {secs:7.2f} s (+{startup:.2f} s start-up, {cpu:.1f} CPU-s), "
                f"peak RSS {peak:.0f} MiB, private {anon:.0f} MiB   (load {os.getloadavg()[0]:.1f})",
                flush=True,
            )
    out = {}
    for stage, measures in runs.items():
        secs, startup, _, _, cpu = sorted(measures)[len(measures) // 2]
        out[stage] = (secs, startup, max(m[2] for m in measures), max(m[3] for m in measures), cpu)  # worst memory
    return out


def clear_derived(corpus: Path) -> None:
    """What the chain writes under a corpus root, removed: the next run starts from the labeled steps alone."""
    for derived in ("strata", "splits", "export", "envsim.duckdb", "envsim.duckdb.wal", ".dagster"):
        path = corpus / derived
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        elif path.exists():
            path.unlink()


#: the assets a user materializes after labeling, in the order of the chain
ASSETS = ["step_strata", "benchmark_split", "sft_mixture", "benchmark_dataset", "sft_dataset"]
ASSET_CHILD = """
import json, os, sys, time
t0 = time.perf_counter()
sys.path.insert(0, {root!r})
from pipeline.core.settings import prepare_process; prepare_process()
import dagster as dg
from assets.definitions import build_definitions
from pipeline.core.settings import settings
defs = build_definitions(settings())
job = dg.define_asset_job("bench_scale_chain", selection={assets!r})
defs = dg.Definitions.merge(defs, dg.Definitions(jobs=[job]))
chain = defs.resolve_job_def("bench_scale_chain")
t1 = time.perf_counter()
with dg.DagsterInstance.local_temp({home!r}) as instance:
    result = chain.execute_in_process(instance=instance, raise_on_error=True)
    t2 = time.perf_counter()
    record = instance.get_run_record_by_id(result.run_id)
    steps = {{s.step_key: s.end_time - s.start_time for s in instance.get_run_step_stats(result.run_id)
             if s.start_time and s.end_time}}
print("@@" + json.dumps({{"startup": t1 - t0, "seconds": t2 - t1, "steps": steps,
                          "run_wall": record.end_time - record.start_time}}))
"""


def bench_assets(corpus: Path, log: Path) -> tuple[Measure, dict[str, float], float]:
    """The chain through the Dagster assets (one process, in-process executor, a temporary instance under the
    corpus root): the process's measure, each step's seconds (Dagster's step statistics) and the run's wall time."""
    clear_derived(corpus)
    code = ASSET_CHILD.format(root=str(ROOT), assets=ASSETS, home=str(corpus / ".dagster"))
    env = {"ENVSIM_DATA_ROOT": str(corpus), "ENVSIM_EXECUTOR": "in_process", "DAGSTER_HOME": str(corpus / ".dagster")}
    (corpus / ".dagster").mkdir(exist_ok=True)
    measure, report = run_code(code, env, stderr=log)
    return measure, report["steps"], report["run_wall"]


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
        secs = startup = peak = anon = cpu = 0.0
        for script, files in scripts:
            paths = ", ".join(f"n.Path({str(ref / f)!r})" for f in files)
            s, u, m, a, c = run_child(
                "import naive_reference as n",
                f"n.STAGES[{script!r}]({paths})",
                {"PYTHONPATH": str(ROOT / "benchmarks")},
            )
            secs, startup, peak, anon, cpu = secs + s, startup + u, max(peak, m), max(anon, a), cpu + c
        out[stage] = (secs, startup, peak, anon, cpu)
    return out


def table(title: str, rows: dict[str, Measure]) -> Measure:
    print(f"== {title} ==")
    print(f"  {'stage':10s} {'seconds':>9s} {'start-up':>9s} {'CPU-s':>7s} {'peak RSS':>12s} {'peak private':>14s}")
    for stage, (secs, startup, peak, anon, cpu) in rows.items():
        print(f"  {stage:10s} {secs:9.2f} {startup:9.2f} {cpu:7.1f} {peak:8.0f} MiB {anon:10.0f} MiB")
    total = sum(r[0] for r in rows.values())
    startup = sum(r[1] for r in rows.values())
    peak = max(r[2] for r in rows.values())
    anon = max(r[3] for r in rows.values())
    cpu = sum(r[4] for r in rows.values())
    print(
        f"  {'total':10s} {total:9.2f} {startup:9.2f} {cpu:7.1f} {peak:8.0f} MiB {anon:10.0f} MiB   (with start-up: "
        f"{total + startup:.2f} s)"
    )
    return total, startup, peak, anon, cpu


def asset_table(steps: int, measure: Measure, step_seconds: dict[str, float], run_wall: float) -> None:
    secs, startup, peak, anon, cpu = measure
    print(f"== assets, {steps} steps (one process, in-process executor; {cpu:.1f} CPU-s) ==")
    for key, seconds in step_seconds.items():
        print(f"  {key:45s} {seconds:8.2f} s")
    print(
        f"  {'Dagster run, wall':45s} {run_wall:8.2f} s   (execute_in_process {secs:.2f} s; definitions loaded in "
        f"{startup:.2f} s; peak RSS {peak:.0f} MiB, peak private {anon:.0f} MiB)"
    )


def bench_size(steps: int, args: argparse.Namespace) -> dict:
    t0 = time.perf_counter()
    corpus = ensure_corpus(steps, args.workdir)
    generated = json.loads((corpus / COMPLETE).read_text())
    repeat = args.repeat if args.repeat is not None else (3 if steps < 1_000_000 else 1)
    print(
        f"corpus: {steps} steps, {sum(f.stat().st_size for f in corpus.rglob('*.parquet')) / 2**20:.0f} MiB "
        f"of Parquet, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    functions = bench_pipeline(corpus, repeat)
    total, startup, peak, anon, _ = table(
        f"pipeline, {steps} steps (per stage: median seconds, highest memory of {repeat} runs)", functions
    )
    result: dict = {
        "steps": steps,
        "cpus": os.cpu_count(),
        "generation": generated,
        "functions": {
            k: dict(zip(("seconds", "startup", "peak_rss_mib", "peak_private_mib", "cpu_seconds"), v))
            for k, v in functions.items()
        },
    }
    assets = args.assets if args.assets is not None else steps >= 1_000_000
    if assets:
        measure, step_seconds, run_wall = bench_assets(corpus, args.workdir / f"assets-{steps}.log")
        asset_table(steps, measure, step_seconds, run_wall)
        result["assets"] = {
            "steps": step_seconds,
            "run_wall": run_wall,
            "seconds": measure[0],
            "startup": measure[1],
            "peak_rss_mib": measure[2],
            "peak_private_mib": measure[3],
            "cpu_seconds": measure[4],
        }
    if args.naive:
        ntotal, nstartup, npeak, nanon, _ = table(
            f"naive reference-style baseline, {steps} steps", bench_naive(corpus, args.workdir)
        )
        print(
            f"== pipeline: {ntotal / total:.1f}x faster ({(ntotal + nstartup) / (total + startup):.1f}x counting "
            f"process start-up); peak RSS {100 * peak / npeak:.1f}% and peak private memory "
            f"{100 * anon / nanon:.1f}% of the naive ones =="
        )
    result["wall_seconds"] = time.perf_counter() - t0
    result["load_average"] = os.getloadavg()
    (args.workdir / f"results-{steps}.json").write_text(json.dumps(result, indent=1))
    print(f"== {steps} steps: {result['wall_seconds']:.0f} s in all (generation included) ==", flush=True)
    if not args.keep:
        shutil.rmtree(corpus, ignore_errors=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="./forge bench-scale", description=" ".join((__doc__ or "").split("\n\n")[0].split())
    )
    parser.add_argument("--steps", type=int, nargs="+", default=[10_000], help="corpus sizes, one chain each")
    parser.add_argument("--naive", action="store_true", help="also run the naive baseline (slow, memory-hungry)")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/envsim-scale"))
    parser.add_argument(
        "--repeat",
        type=int,
        default=None,
        help="pipeline chain runs; each stage reports its median seconds and its highest memory (default: 3 "
        "below 1M steps, else 1)",
    )
    parser.add_argument(
        "--assets",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also materialize the chain through the Dagster assets (default: from 1M steps)",
    )
    parser.add_argument(
        "--keep",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="keep the generated corpora for the next run (default: below 1M steps)",
    )
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    for steps in args.steps:
        keep = args.keep
        bench_size(steps, argparse.Namespace(**{**vars(args), "keep": steps < 1_000_000 if keep is None else keep}))


if __name__ == "__main__":
    main()
