"""Crash consistency, tested by killing the real ``./forge run``: SIGKILL at each asset boundary and inside long steps
(``FORGE_FAULT``, cli/launch.py: the launcher signals itself when a named step starts or ends), SIGINT and SIGTERM
sent from outside while a step runs. After each, the next plain ``./forge run`` on the same root starts at once (the
dead run's lock and pool slots reclaimed), resumes, and the chain ends with the bytes of an uninterrupted run: the
same split versions, steps, samples and exports. One writer per data root: a second ``./forge run`` on a root in use
exits 2 naming the run; ``./forge sql`` on a root being written says it must wait. The runs are shared: one reference
run and one chain per corpus."""

from __future__ import annotations

import hashlib
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import duckdb
import pytest
import yaml

from pipeline.core import root_lock
from pipeline.core.processes import end
from tests.support.fake_llamafactory import make_env
from tests.support.user_corpora import PROJECT, run_config, write_tiny_corpus

pytestmark = pytest.mark.slow

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


def _env(root: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ENVSIM_", "DAGSTER_HOME", "FORGE_FAULT"))}
    return {**env, "ENVSIM_DATA_ROOT": str(root), **extra}


def forge(root: Path, args: list[str], fault: str | None = None, timeout: float = 1200) -> subprocess.CompletedProcess:
    """``./forge ARGS`` on the data root ``root`` (with ``FORGE_FAULT=fault``), to its end."""
    env = _env(root, **({"FORGE_FAULT": fault} if fault else {}))
    return subprocess.run(["./forge", *args], cwd=PROJECT, env=env, capture_output=True, text=True, timeout=timeout)


def signalled(root: Path, args: list[str], step: str, sig: int, after_s: float) -> tuple[subprocess.Popen, float, str]:
    """``./forge ARGS`` in a process group of its own (a terminal's foreground job), the group sent ``sig`` (what
    Ctrl-C does) ``after_s`` seconds after the console first names ``step``; returns the process (ended), the
    seconds from the signal to its end, and its stderr."""
    proc = subprocess.Popen(
        ["./forge", *args],
        cwd=PROJECT,
        env=_env(root),
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


def _assert_reclaimed(proc: subprocess.CompletedProcess, what: str) -> None:
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


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> tuple[list[str], Path]:
    """``./forge run -c`` on a small user corpus: its arguments, and the data root of one uninterrupted run."""
    where = tmp_path_factory.mktemp("tiny")
    env_file, scen_file = write_tiny_corpus(where / "corpus")
    config = where / "run.yaml"
    config.write_text(yaml.safe_dump(run_config(env_file, scen_file)))
    args = ["run", "-c", str(config)]
    reference = forge(where / "reference", args)
    assert reference.returncode == 0, reference.stderr[-3000:]
    return args, where / "reference"


def _bench_model(root: Path, tmp_path: Path, kill: str, seconds: int) -> tuple[subprocess.CompletedProcess, list[int]]:
    """``timeout -s KILL SECONDS ./forge bench-model`` on ``root``'s benchmark with a stand-in LLaMA-Factory whose
    ``api`` server never gets ready; returns the command and the server's process ids (none: not started in
    time)."""
    python = make_env(tmp_path / f"lf-{kill}")
    weights = tmp_path / "weights"
    weights.mkdir(exist_ok=True)
    (weights / "config.json").write_text('{"model_type": "qwen2"}')
    (weights / "model.safetensors").write_bytes(b"\0" * 16)
    pids = tmp_path / f"api-{kill}.pids"
    env = _env(root, ENVSIM_LLAMAFACTORY_PYTHON=str(python), FAKE_LF_API_PIDS=str(pids))
    command = ["timeout", "-s", kill, str(seconds), "./forge", "bench-model", "--checkpoint", str(weights)]
    proc = subprocess.run([*command, "--template", "qwen"], cwd=PROJECT, env=env, capture_output=True, text=True)
    return proc, [int(p) for p in pids.read_text().split()] if pids.is_file() else []


def _gone(pids: list[int], within_s: float = 10.0) -> list[int]:
    """Those of ``pids`` still running after ``within_s`` seconds."""
    deadline = time.monotonic() + within_s
    while (left := [p for p in pids if root_lock.process_start(p) is not None]) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


@pytest.mark.parametrize("kill", ["TERM", "KILL"])
def test_a_model_server_goes_with_its_command(tiny, tmp_path, kill):
    """``timeout 20 ./forge bench-model``: SIGTERM stops the server it started and everything in the server's
    process group (the command's ``finally``); SIGKILL stops the server by its parent-death signal. (A machine too
    busy to start the server in 20 s gets a longer timeout: the server must have started.)"""
    _, reference = tiny
    for seconds in (20, 120):
        proc, pids = _bench_model(reference, tmp_path, kill, seconds)
        if pids:
            break
    assert pids, f"the server never started: {proc.stderr[-2000:]}"
    try:
        if kill == "TERM":
            assert proc.returncode == 124, proc.stderr[-2000:]
            assert proc.stderr.strip().splitlines()[-1] == "./forge bench-model: interrupted", proc.stderr[-2000:]
            assert _gone(pids) == []
        else:  # timeout's SIGKILL goes to its process group, timeout included
            assert proc.returncode in (-signal.SIGKILL, 128 + signal.SIGKILL), proc.stderr[-2000:]
            assert _gone(pids[:1]) == []  # the server; what it started itself is its own to stop
    finally:
        end(pids)


def test_one_writer_per_data_root(tmp_path):
    """A live holder: a second ``./forge run`` exits 2 naming it; ``./forge sql`` on a DuckDB file held for writing
    says to wait (never DuckDB's raw lock error); a holder that is gone is taken over with one line."""
    root = tmp_path / "data"
    fd, stale = root_lock.acquire(root)  # this process holds the root, as a running ./forge run does
    assert stale is None
    try:
        second = forge(root, ["run"], timeout=300)
        assert second.returncode == 2, second.stderr
        me = root_lock.Holder.me()
        assert second.stderr.strip() == (
            f"./forge run: data root {root} is in use by a run starting (pid {me.pid}, started "
            f"{root_lock.read_holder(root).started}); wait, or use another ENVSIM_DATA_ROOT"
        )
        with duckdb.connect(str(root / "envsim.duckdb")) as writer:
            writer.execute("CREATE TABLE t AS SELECT 1 AS x")
            sql = forge(root, ["sql", "SELECT 1"], timeout=300)
        assert sql.returncode == 1
        assert sql.stderr.strip() == (
            f"./forge sql: {root / 'envsim.duckdb'} is being written by ./forge run (pid {me.pid}, started "
            f"{root_lock.read_holder(root).started}): wait until it ends, then query again"
        )
    finally:
        os.close(fd)  # released without clearing the file: as a killed holder leaves it
    gone = os.getpid() + 10**7  # above any pid_max: no such process
    (root / root_lock.LOCK_FILE).write_text(f'{{"pid": {gone}, "start": 1, "host": "{me.host}", "started": "then"}}')
    fd, stale = root_lock.acquire(root)
    try:
        assert stale is not None and stale.started == "then" and not stale.alive()
    finally:
        root_lock.release(fd, root)
    assert root_lock.read_holder(root) is None


@pytest.mark.timeout(3600)
def test_a_user_corpus_killed_at_every_point_resumes_to_the_bytes_of_an_uninterrupted_run(
    tiny, tmp_path, record_property
):
    args, reference = tiny
    root = tmp_path / "killed"
    tried = kill_chain(root, args, BOUNDARIES, INSIDE) + stop_chain(root, args)
    resumed = forge(root, args)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "reclaimed" not in resumed.stdout  # the stops left nothing to reclaim
    assert product_bytes(root) == product_bytes(reference)
    record_property("reported", f"kill points tried on a user corpus: {tried}")


@pytest.mark.timeout(2400)
def test_the_default_run_killed_inside_collection_and_at_a_boundary_resumes_to_the_same_bytes(
    tmp_path, record_property
):
    reference = forge(tmp_path / "reference", ["run"])
    assert reference.returncode == 0, reference.stderr[-3000:]
    root = tmp_path / "killed"
    tried = kill_chain(root, ["run"], ["labeled_steps"], [("trajectories", 5.0), ("sft_dataset", 0.5)])
    resumed = forge(root, ["run"])
    _assert_reclaimed(resumed, "the run after the kills")
    assert product_bytes(root) == product_bytes(tmp_path / "reference")
    record_property("reported", f"kill points tried on the default data: {tried}")
