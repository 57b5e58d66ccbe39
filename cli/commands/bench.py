"""``./forge bench``: the sandbox labeling and evaluation harness benchmarks."""

from __future__ import annotations

import argparse
import sys

from cli.base import ROOT, call, child_env, command


@command("        set up, run the benchmarks (sandbox labeling throughput, evaluation harness)")
def bench(argv: list[str]) -> int:
    """``./forge bench``: sandbox labeling throughput (the arguments go to benchmarks/bench_labeling.py), then the
    evaluation harness."""
    parser = argparse.ArgumentParser(
        prog="./forge bench",
        description=(
            "Run the benchmarks: benchmarks/bench_labeling.py (sandbox labeling throughput and peak memory; the other "
            "arguments are its own: --workers N..., --repeat N, --pack-calls N), then benchmarks/bench_harness.py "
            "(evaluation harness throughput)."
        ),
    )
    _, rest = parser.parse_known_args(argv)
    env = child_env()
    return call([sys.executable, str(ROOT / "benchmarks" / "bench_labeling.py"), *rest], env) or call(
        [sys.executable, str(ROOT / "benchmarks" / "bench_harness.py")], env
    )
