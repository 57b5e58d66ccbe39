"""Evaluation-harness throughput against a local OpenAI-compatible server with a fixed latency.

At concurrency C and per-request latency L the ceiling is C / L requests per second; the harness
should reach at least 90% of it. Also checks that a resumed run asks nothing twice.

    python benchmarks/bench_harness.py [--concurrency 16 32] [--latency 0.1] [--requests 800]
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.evaluate.harness import evaluate
from pipeline.evaluate.simulators import make_simulator, simulator_spec

ROOT = Path(__file__).resolve().parents[1]


def synthetic_samples(n: int) -> list[dict]:
    state = '{"accounts":{"A1":{"balance":10}}}'
    return [
        {
            "step_id": f"s{i}",
            "stratum": "simple_1",
            "env_id": "bench",
            "tool": "deposit",
            "outcome": "success",
            "delta_size": 1,
            "args_count": 2,
            "arguments_json": f'{{"account_id":"A1","amount":{i}}}',
            "code": "def deposit(...): ...",
            "state_before_json": state,
            "state_after_json": f'{{"accounts":{{"A1":{{"balance":{10 + i}}}}}}}',
            "raw_observation": f"{{'success': True, 'balance': {10 + i}}}",
            "delta": [{"op": "replace", "path": ["accounts", "A1", "balance"], "before": "10", "after": str(10 + i)}],
        }
        for i in range(n)
    ]


async def timed(samples, spec, path) -> tuple[float, object]:
    sim = make_simulator(spec)
    start = time.perf_counter()
    try:
        report = await evaluate(samples, sim, "bench", path)
    finally:
        await sim.aclose()
    return time.perf_counter() - start, report


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join((__doc__ or "").split("\n\n")[0].split()))
    parser.add_argument("--concurrency", type=int, nargs="*", default=[16, 64])
    parser.add_argument("--latency", type=float, default=0.5)
    parser.add_argument("--requests", type=int, default=800)
    args = parser.parse_args()
    samples = synthetic_samples(args.requests)
    # the server runs in its own process, so its threads do not compete with the harness for the GIL
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.support.fake_openai", "correct", str(args.latency)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    url = proc.stdout.readline().strip()
    try:
        _bench(samples, url, args)
    finally:
        proc.stdin.close()
        proc.wait(timeout=10)


def _bench(samples: list[dict], url: str, args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for c in args.concurrency:
            path = Path(tmp) / f"c{c}.jsonl"
            spec = simulator_spec(name=f"c{c}", model="m", base_url=url, concurrency=c, max_retries=0, timeout_s=30)
            secs, report = asyncio.run(timed(samples, spec, path))
            ceiling = c / args.latency
            rate = report.completed / secs
            print(
                f"C={c:3d} L={args.latency:.3f}s: {report.completed} requests in {secs:.2f}s = {rate:7.1f} req/s "
                f"({100 * rate / ceiling:5.1f}% of C/L = {ceiling:.0f}); peak RSS "
                f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB"
            )
            _, again = asyncio.run(timed(samples, spec, path))
            print(f"        resume: {again.skipped} skipped, {again.completed + again.request_errors} new requests")


if __name__ == "__main__":
    main()
