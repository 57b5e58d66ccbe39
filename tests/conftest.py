import os

# The local fake Hub (tests/support/fake_hub.py) speaks the LFS upload protocol, not Xet storage: configure the
# (unpatched) huggingface_hub client accordingly before anything imports it.
os.environ.setdefault("HF_HUB_DISABLE_XET", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")

import json
import shutil
from pathlib import Path

import pytest

from pipeline.collect.collector import collect
from pipeline.envs.bfcl_replay import ground_truth_trajectories
from pipeline.envs.bfcl_tasks import BfclTaskFile, default_task_files, iter_tasks
from pipeline.envs.catalog import build_catalog
from pipeline.execution.child import Limits
from pipeline.execution.sandbox import Sandbox
from pipeline.labeling.steps import label
from pipeline.store.layout import DataLayout
from tests.support import leftovers
from tests.support.parallel import (
    LongestFilesFirst,
    RecordDurations,
    auto_workers,
    built_once,
    run_base,
    share_rewritten_tests,
    time_limits,
    worker_temp_dir,
    worker_threads,
)


@pytest.fixture(scope="session")
def sandbox():
    with Sandbox(workers=2, limits=Limits(call_timeout_s=10)) as box:
        yield box


@pytest.fixture(scope="session")
def default_layout(tmp_path_factory, sandbox):
    """All 800 bfcl multi-turn tasks collected and labeled once per test run (under pytest-xdist: by the first
    worker that needs them, the others wait and copy), each worker with its own copy to change."""

    def replay(root: Path) -> None:
        layout = DataLayout.at(root)
        build_catalog(layout)
        collect(ground_truth_trajectories(iter_tasks(default_task_files())), layout, sandbox)
        label(layout, sandbox)

    built = built_once(run_base(tmp_path_factory), "bfcl-default", replay)
    layout = DataLayout.at(tmp_path_factory.mktemp("data-default"))
    shutil.copytree(built, layout.root, dirs_exist_ok=True)
    return layout


# the test loop under pytest-xdist (tests/support/parallel.py, [tool.pytest.ini_options] in pyproject.toml)


def pytest_configure(config):
    leftovers.become_subreaper()
    share_rewritten_tests(config)
    worker_temp_dir(config.option.basetemp)
    worker_threads()
    config.pluginmanager.register(LongestFilesFirst(), "envsim-longest-files-first")
    # taken out of the environment: the workers report to this process, and a pytest run a test starts (the test
    # loop's own tests) must not write the durations file while another test checks the tree is clean
    if os.environ.pop("ENVSIM_RECORD_DURATIONS", None):
        config.pluginmanager.register(RecordDurations(), "envsim-record-durations")


def pytest_sessionfinish(session, exitstatus):
    """No test leaves a process behind (tests/support/leftovers.py)."""
    leftovers.check(session)


def pytest_terminal_summary(terminalreporter):
    """What a test reports of its run (``record_property("reported", line)``: e.g. how many kill points it tried),
    one line each at the end of the run, under xdist too (a worker's own output is not shown)."""
    lines = [
        f"{report.nodeid.split('::')[-1]}: {value}"
        for report in terminalreporter.stats.get("passed", [])
        for name, value in getattr(report, "user_properties", ())
        if name == "reported" and report.when == "call"
    ]
    if lines:
        terminalreporter.section("reported by the tests")
        for line in lines:
            terminalreporter.write_line(line)


def pytest_xdist_auto_num_workers(config):
    return auto_workers(os.cpu_count() or 1)


@pytest.hookimpl(tryfirst=True)  # the slow marks before `-m "not slow"` deselects
def pytest_collection_modifyitems(config, items):
    time_limits(items)


def write_jsonl(path: Path, rows: list) -> Path:
    with path.open("w") as fh:
        for row in rows:
            fh.write(row if isinstance(row, str) else json.dumps(row))
            fh.write("\n")
    return path


def make_task_file(tmp_path: Path, tasks: list, answers: list, category: str = "custom") -> BfclTaskFile:
    return BfclTaskFile(
        write_jsonl(tmp_path / f"{category}_tasks.json", tasks),
        write_jsonl(tmp_path / f"{category}_answers.json", answers),
        category,
    )


TWITTER_CFG = {
    "TwitterAPI": {
        "username": "john",
        "password": "john123",
        "authenticated": True,
        "tweets": {},
        "comments": {},
        "retweets": {},
        "following_list": [],
        "tweet_counter": 0,
    }
}
