"""The sandbox worker stays a small, single-threaded process: importing it loads no numpy or pyarrow (whose thread
pools would give every idle worker extra threads, and the worker forks children)."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_worker_imports_no_numpy_or_pyarrow_and_runs_one_thread():
    probe = (
        "import json, os, sys, pipeline.execution.worker; "
        "print(json.dumps({'modules': sorted(m for m in ('numpy', 'pyarrow', 'pandas', 'duckdb', 'dagster') "
        "if m in sys.modules), 'threads': len(os.listdir('/proc/self/task'))}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True
    )
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen == {"modules": [], "threads": 1}, seen
