"""Killing the real ``./forge run`` (tests/e2e/test_kill_resume*.py): SIGKILL at a named step's start or end
(``FORGE_FAULT``, cli/launch.py: the launcher signals itself), SIGINT and SIGTERM sent from outside while a step runs,
and the SHA-256 of every product file of a data root, to compare a resumed root with an uninterrupted one."""

from __future__ import annotations

import hashlib
import os
import re
import signal
import subprocess
import time
from pathlib import Path

from pipeline.core import root_lock
from tests.support.user_corpora import PROJECT

#: what ``./forge run`` says when a signal stops it
INTERRUPTED = re.compile(r"^\./forge run: interrupted (at step \S+|before its first step); run it again to resume$")
#: files of a data root that hold no product bytes: the run history, the lock, the DuckDB index (rebuilt from the
#: tables of record), logs of when things ran and how long they took, the accepted corpus's run config (it names its
#: own root), and the temporary files of table writes a kill cut short (``.NAME.PID.tmp``: never read)
NOT_PRODUCT = re.compile(
    r"^(\.dagster_home/|\.forge-run\.lock$|envsim\.duckdb|.*history\.jsonl$|.*\.lock$|jobs/|eval/.*\.jsonl$"
    r"|quality/checks/.*\.jsonl$|quality/env_yield/|quality/accepted/run\.yaml$|(.*/)?\.[^/]*\.\d+\.tmp$)"
)
#: SIGKILL at the end of each asset, in the order the main job runs them, then inside the long steps
BOUNDARIES = [
    "environment_catalog",
    "trajectories",
    "labeled_steps",
    "environment_report",
    "step_strata",
    "benchmark_split",
    "environment_yield",
    "benchmark_dataset",
    "sft_mixture",
    "simulator_eval",
    "sft_dataset",
]
#: (simulator_eval's delay is short: on a root whose samples are all scored and whose plot is kept, the run ends about
#: 1.5 s after that step starts)
INSIDE = [("trajectories", 3.0), ("labeled_steps_step_table_expectations", 1.0), ("simulator_eval", 0.3)]


def forge_env(root: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ENVSIM_", "DAGSTER_HOME", "FORGE_FAULT"))}
    return {**env, "ENVSIM_DATA_ROOT": str(root), **extra}


def forge(root: Path, args: list[str], fault: str | None = None, timeout: float = 1200) -> subprocess.CompletedProcess:
    """``./forge ARGS`` on the data root ``root`` (with ``FORGE_FAULT=fault``), to its end."""
    env = forge_env(root, **({"FORGE_FAULT": fault} if fault else {}))
    return subprocess.run(["./forge", *args], cwd=PROJECT, env=env, capture_output=True, text=True, timeout=timeout)


def signalled(root: Path, args: list[str], step: str, sig: int, after_s: float) -> tuple[subprocess.Popen, float, str]:
    """``./forge ARGS`` in a process group of its own (a terminal's foreground job), the group sent ``sig`` (what
    Ctrl-C does) ``after_s`` seconds after the console first names ``step``; returns the process (ended), the
    seconds from the signal to its end, and its stderr."""
    proc = subprocess.Popen(
        ["./forge", *args],
        cwd=PROJECT,
        env=forge_env(root),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        process_group=0,
    )
    lines = []
    for line in proc.stderr:  # type: ignore[union-attr]  # Dagster's console is stderr
        lines.append(line)
        if f" - {step} - " in line:
            break
    time.sleep(after_s)
    sent = time.monotonic()
    os.killpg(proc.pid, sig)
    _, err = proc.communicate(timeout=60)
    return proc, time.monotonic() - sent, "".join(lines) + err


def product_bytes(root: Path) -> dict[str, str]:
    """SHA-256 of every product file of a data root (:data:`NOT_PRODUCT` left out), by path."""
    out = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        if not NOT_PRODUCT.match(rel):
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def assert_reclaimed(proc: subprocess.CompletedProcess, what: str) -> None:
    """The run after a SIGKILL: it took the stale lock over and marked the dead run failed, then succeeded."""
    assert proc.returncode == 0, f"{what}: {proc.stderr[-3000:]}"
    assert "taking over data root" in proc.stdout and "reclaimed run" in proc.stdout, f"{what}: {proc.stdout[:2000]}"


def kill_chain(root: Path, args: list[str], boundaries: list[str], inside: list[tuple[str, float]]) -> int:
    """SIGKILL ``./forge ARGS`` at the end of each step of ``boundaries`` and ``delay`` seconds into each step of
    ``inside``; each killed run is followed by the next point's run on the same root, which must start, reclaim the
    dead run and resume. Returns how many kill points were tried."""
    points = [f"{s}:end:KILL" for s in boundaries] + [f"{s}:start:KILL:{d}" for s, d in inside]
    for n, point in enumerate(points):
        proc = forge(root, args, fault=point)
        assert proc.returncode == -signal.SIGKILL, f"{point}: not killed ({proc.returncode}): {proc.stderr[-2000:]}"
        if n:  # it followed a killed run: it took that run's lock and slots
            assert "taking over data root" in proc.stdout, f"{point}: {proc.stdout[:2000]}"
    return len(points)


def stop_chain(root: Path, args: list[str]) -> int:
    """SIGINT and SIGTERM, each while a step runs: the run ends within a few seconds, with the one line and no
    traceback, and the next run does not need to reclaim anything (the stop marked its runs canceled)."""
    tried = 0
    for step, sig, after in (("trajectories", signal.SIGINT, 2.0), ("step_strata", signal.SIGTERM, 0.0)):
        proc, seconds, err = signalled(root, args, step, sig, after)
        tried += 1
        assert proc.returncode == 128 + sig, f"{sig.name} at {step}: exit {proc.returncode}: {err[-2000:]}"
        assert seconds < 10, f"{sig.name} at {step}: {seconds:.1f}s to stop"
        assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-3000:]
        assert INTERRUPTED.match(err.strip().splitlines()[-1]), err[-500:]
        assert root_lock.read_holder(root) is None, "a stopped run gives its lock back"
    return tried
