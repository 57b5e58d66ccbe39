"""``./forge bench-scale``: stratify -> select -> export on synthetic corpora."""

from __future__ import annotations

import os
import sys

from cli.base import ROOT, become, child_env, command, wants_help


@command("[--steps N ...] [--naive]   stratify -> select -> export on synthetic corpora (functions, assets)")
def bench_scale(argv: list[str]) -> int:
    """``./forge bench-scale``: benchmarks/bench_scale.py with the arguments as given."""
    env = dict(os.environ) if wants_help(argv) else child_env()
    return become([sys.executable, str(ROOT / "benchmarks" / "bench_scale.py"), *argv], env)
