"""Crash consistency, tested by killing the real ``./forge run``: SIGKILL at each asset boundary and inside long steps
(``FORGE_FAULT``, cli/launch.py: the launcher signals itself when a named step starts or ends), SIGINT and SIGTERM
sent from outside while a step runs. After each, the next plain ``./forge run`` on the same root starts at once (the
dead run's lock and pool slots reclaimed), resumes, and the chain ends with the bytes of an uninterrupted run: the
same split versions, steps, samples and exports. One writer per data root: a second ``./forge run`` on a root in use
exits 2 naming the run; ``./forge sql`` on a root being written says it must wait. The runs are shared: one reference
run and one chain for the small user corpus (the default run's chain: tests/e2e/test_kill_resume_default.py, a file
of its own, so that the two chains run side by side)."""

from __future__ import annotations

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
from pipeline.store.layout import DataLayout
from pipeline.store.versions import BENCHMARK, MIXTURE, SplitStore
from tests.support.fake_llamafactory import make_env
from tests.support.kills import BOUNDARIES, INSIDE, forge, forge_env, kill_chain, product_bytes, stop_chain
from tests.support.user_corpora import PROJECT, run_config, write_tiny_corpus

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> tuple[list[str], Path, str]:
    """``./forge run -c`` on a small user corpus: its arguments, the data root of one uninterrupted run and that run's
    console."""
    where = tmp_path_factory.mktemp("tiny")
    env_file, scen_file = write_tiny_corpus(where / "corpus")
    config = where / "run.yaml"
    config.write_text(yaml.safe_dump(run_config(env_file, scen_file)))
    args = ["run", "-c", str(config)]
    reference = forge(where / "reference", args)
    assert reference.returncode == 0, reference.stderr[-3000:]
    return args, where / "reference", reference.stdout + reference.stderr


def _bench_model(root: Path, tmp_path: Path, kill: str) -> tuple[subprocess.CompletedProcess, list[int]]:
    """``timeout -s KILL 600 ./forge bench-model`` on ``root``'s benchmark with a stand-in LLaMA-Factory whose ``api``
    server never gets ready, timed out as soon as the server has started: ``timeout`` is sent SIGALRM, its own timer's
    signal, so it does what it does when the time is up (signals the command, then its process group, and exits 124).
    Returns the command and the server's process ids (none: the command ended before it started one)."""
    python = make_env(tmp_path / f"lf-{kill}")
    weights = tmp_path / "weights"
    weights.mkdir(exist_ok=True)
    (weights / "config.json").write_text('{"model_type": "qwen2"}')
    (weights / "model.safetensors").write_bytes(b"\0" * 16)
    pids = tmp_path / f"api-{kill}.pids"
    env = forge_env(root, ENVSIM_LLAMAFACTORY_PYTHON=str(python), FAKE_LF_API_PIDS=str(pids))
    command = ["timeout", "-s", kill, "600", "./forge", "bench-model", "--checkpoint", str(weights)]
    command += ["--template", "qwen"]
    proc = subprocess.Popen(command, cwd=PROJECT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while len(started := _pids(pids)) < 2 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGALRM)
    out, err = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(command, proc.returncode, out, err), started


def _pids(path: Path) -> list[int]:
    """The process ids the stand-in server wrote to ``path`` (none yet: an empty list)."""
    return [int(p) for p in path.read_text().split()] if path.is_file() else []


def _gone(pids: list[int], within_s: float = 10.0) -> list[int]:
    """Those of ``pids`` still running after ``within_s`` seconds."""
    deadline = time.monotonic() + within_s
    while (left := [p for p in pids if root_lock.process_start(p) is not None]) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


@pytest.mark.parametrize("kill", ["TERM", "KILL"])
def test_a_model_server_goes_with_its_command(tiny, tmp_path, kill):
    """``timeout ./forge bench-model`` timing out while its model server loads: SIGTERM stops the server it started
    and everything in the server's process group (the command's ``finally``); SIGKILL stops the server by its
    parent-death signal."""
    _, reference, _ = tiny
    proc, pids = _bench_model(reference, tmp_path, kill)
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
        assert stale is not None and stale.started == "then"
        assert not root_lock.process_alive(stale.pid, stale.start, stale.host)
    finally:
        root_lock.release(fd, root)
    assert root_lock.read_holder(root) is None


@pytest.mark.timeout(3600)
def test_a_user_corpus_killed_at_every_point_resumes_to_the_bytes_of_an_uninterrupted_run(
    tiny, tmp_path, record_property
):
    args, reference, _ = tiny
    root = tmp_path / "killed"
    tried = kill_chain(root, args, BOUNDARIES, INSIDE) + stop_chain(root, args)
    resumed = forge(root, args)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "reclaimed" not in resumed.stdout  # the stops left nothing to reclaim
    assert product_bytes(root) == product_bytes(reference)
    record_property("reported", f"kill points tried on a user corpus: {tried}")


def test_a_three_environment_corpus_explores_in_seconds_and_names_what_it_cannot_reach(tiny):
    """The uninterrupted reference run, as a user runs a 3-environment corpus with the default profile: exploration
    stops in seconds, naming the unreachable targets, and both products come out."""
    _, reference, out = tiny
    finished = [line for line in out.splitlines() if "exploration:" in line and " in " in line]
    assert finished, out[-3000:]
    calls = int(re.search(r"exploration: ([\d,]+)/", finished[-1]).group(1).replace(",", ""))
    assert calls <= 9_000, finished[-1]  # 3,000 per environment at most; the old default spent 60,000
    minutes, seconds = map(int, re.search(r" in (\d+):(\d+)", finished[-1]).groups())
    assert 60 * minutes + seconds < 60, finished[-1]
    assert re.search(r"difficult \(\|Δ\| 7.12\): unreachable, max \|Δ\| seen 2", out), finished[-1]
    layout = DataLayout.at(reference)
    for kind in (BENCHMARK, MIXTURE):
        assert SplitStore(layout, kind).current(), kind
