"""The test loop (docs/commands.md "Tests"): pytest-xdist with one worker more than the CPUs, a module's shared
set-up made once, the files that take longest first, the slowest tests printed and a per-test timeout, all from
pyproject.toml so `./forge test` and `.ci/run` get them (tests/support/parallel.py, tests/conftest.py)."""

import json
import os
import re
import subprocess
import sys
import threading
import time
import tomllib
from pathlib import Path

from tests.support import parallel
from tests.support.parallel import SLOW, SLOW_TIMEOUT_S, built_once

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_pyproject_runs_the_suite_on_xdist_workers_with_durations_and_a_timeout():
    pytest_ini = PYPROJECT["tool"]["pytest"]["ini_options"]
    addopts = pytest_ini["addopts"].split()
    assert {"-n", "--dist", "--no-loadscope-reorder", "--durations=25"} <= set(addopts), addopts
    assert addopts[addopts.index("-n") + 1] == "auto" and addopts[addopts.index("--dist") + 1] == "loadfile"
    assert 0 < int(pytest_ini["timeout"]) < SLOW_TIMEOUT_S
    assert any(dep.startswith("pytest-xdist") for dep in PYPROJECT["project"]["optional-dependencies"]["dev"])


def test_a_directory_built_once_is_built_by_one_caller_while_the_others_wait(tmp_path):
    builds, seen = [], []

    def build(target: Path) -> None:
        builds.append(threading.get_ident())
        time.sleep(0.3)  # the others arrive meanwhile and must wait, not build again
        (target / "made").write_text("once")

    def ask() -> None:
        got = built_once(tmp_path, "shared", build)
        seen.append((got / "made").read_text())

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(builds) == 1 and seen == ["once"] * 4
    assert built_once(tmp_path, "shared", build) == tmp_path / "shared" and len(builds) == 1


def test_a_test_module_is_rewritten_once_for_every_worker_outside_the_tree():
    """Its assert-rewritten code comes from the shared cache outside the tree (parallel.share_rewritten_tests),
    which under xdist the controller filled before this worker started."""
    from _pytest.assertion import rewrite

    here = Path(__file__).resolve()
    assert rewrite.get_cache_dir(here) == parallel.REWRITE_CACHE.joinpath(*here.parts[1:-1])
    assert ROOT not in rewrite.get_cache_dir(here).parents
    if parallel.WORKER:
        assert parallel._cached(here) is not None


SUITE = """
import os

import pytest


@pytest.fixture(scope="module")
def made():
    with open(os.environ["MADE_LOG"], "a") as fh:
        fh.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")


@pytest.mark.parametrize("i", range(8))
def test_shares_the_module_fixture(made, i):
    pass


@pytest.mark.parametrize("i", range(8))
def test_alone(i):
    assert os.environ["TMPDIR"].endswith("tmp-" + os.environ["PYTEST_XDIST_WORKER"])
    assert os.environ["OMP_NUM_THREADS"] == str(max(1, (os.cpu_count() or 1) // 2))  # a worker's share of the CPUs


@pytest.mark.slow
def test_slow(request):
    assert request.node.get_closest_marker("timeout").args == (SLOW,)
"""


# tests/conftest.py's hooks, without its pipeline imports and session fixtures
CONFTEST = """from tests.support.parallel import LongestFilesFirst, time_limits, worker_temp_dir, worker_threads


def pytest_configure(config):
    worker_temp_dir(config.option.basetemp)
    worker_threads()
    config.pluginmanager.register(LongestFilesFirst(), "envsim-longest-files-first")


def pytest_collection_modifyitems(config, items):
    time_limits(items)
"""


def test_with_the_projects_options_a_module_fixture_is_made_once_and_slow_tests_get_the_longer_timeout(tmp_path):
    """pyproject.toml's pytest options on two workers, 17 tests: the 8 that share a module-scoped fixture run on one
    worker, which makes it once (xdist's default distribution splits them and both workers make it)."""
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_suite.py").write_text(SUITE.replace("SLOW", str(SLOW_TIMEOUT_S)))
    log = tmp_path / "made.log"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MADE_LOG": str(log)}
    env.pop("PYTEST_XDIST_WORKER", None)
    env.pop("OMP_NUM_THREADS", None)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-c",
            str(ROOT / "pyproject.toml"),
            "-p",
            "no:cacheprovider",
            "-n",
            "2",
            "--basetemp",
            str(tmp_path / "base"),
            str(tmp_path / "test_suite.py"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "17 passed" in proc.stdout and "slowest 25 durations" in proc.stdout, proc.stdout[-3000:]
    assert len(log.read_text().splitlines()) == 1, log.read_text()


def test_every_end_to_end_test_marked_slow_by_name_still_exists():
    """tests/support/parallel.py SLOW names tests by node id prefix: a renamed or moved test would silently fall
    back into the fast subset."""
    stale = []
    for prefix in SLOW:
        path, _, name = prefix.partition("::")
        source = (ROOT / path).read_text() if (ROOT / path).is_file() else ""
        function = name.split("[")[0]
        if not source or (function and not re.search(rf"^def {re.escape(function)}", source, re.M)):
            stale.append(prefix)
    assert stale == [], f"no such test (update SLOW in tests/support/parallel.py): {stale}"


class _Item:
    def __init__(self, nodeid: str, slow: bool = False):
        self.nodeid, self.slow = nodeid, slow

    def get_closest_marker(self, name):
        return name == "slow" and self.slow or None


def test_the_files_that_take_longest_start_first_by_what_was_selected(monkeypatch):
    """The order xdist hands files out in (``--dist loadfile``, ``--no-loadscope-reorder``): longest first, a
    file's cost the recorded time of its selected tests, an unrecorded test counted by its kind."""
    monkeypatch.setattr(parallel, "WORKER", "gw0")
    items = [
        _Item("tests/a.py::one"),
        _Item("tests/a.py::two"),
        _Item("tests/b.py::long"),
        _Item("tests/c.py::new", slow=True),
        _Item("tests/d.py::new"),
    ]
    durations = {"tests/a.py::one": 20.0, "tests/a.py::two": 15.0, "tests/b.py::long": 40.0}
    parallel.longest_files_first(items, durations)
    assert [i.nodeid for i in items] == [
        "tests/b.py::long",  # 40 s
        "tests/a.py::one",  # 35 s in two tests, kept in their order
        "tests/a.py::two",
        "tests/c.py::new",  # unrecorded, slow: 30 s
        "tests/d.py::new",  # unrecorded, plain: 0.5 s
    ]
    selected = [i for i in items if i.nodeid != "tests/b.py::long"]  # `-k` left out the long one
    parallel.longest_files_first(selected, durations)
    assert selected[0].nodeid == "tests/a.py::one"
    monkeypatch.setattr(parallel, "WORKER", "")
    plain = [_Item("tests/d.py::x"), _Item("tests/b.py::long")]
    parallel.longest_files_first(plain, durations)
    assert [i.nodeid for i in plain] == ["tests/d.py::x", "tests/b.py::long"]  # a plain run keeps its order


def test_a_recorded_run_updates_the_durations_of_what_it_ran_and_a_failed_run_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(parallel, "DURATIONS", tmp_path / "durations.json")
    (tmp_path / "durations.json").write_text('{"tests/a.py::old": 3.0, "tests/b.py::x": 9.0}')

    def report(nodeid, duration, failed=False):
        return type("R", (), {"nodeid": nodeid, "duration": duration, "failed": failed})()

    rec = parallel.RecordDurations()
    for phase in (0.5, 2.0, 0.25):  # set-up, call, teardown
        rec.pytest_runtest_logreport(report("tests/b.py::x", phase))
    rec.pytest_sessionfinish(None)
    assert json.loads((tmp_path / "durations.json").read_text()) == {"tests/a.py::old": 3.0, "tests/b.py::x": 2.75}
    failed = parallel.RecordDurations()
    failed.pytest_runtest_logreport(report("tests/b.py::x", 99.0, failed=True))
    failed.pytest_sessionfinish(None)
    assert json.loads((tmp_path / "durations.json").read_text())["tests/b.py::x"] == 2.75
