"""Feedback: progress lines with totals and ETA in collection and labeling, and the console at INFO."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.collect.explore import ExploreSettings
from pipeline.collect.run import AgentRun, collect_all
from pipeline.collect.sources import SourceConfig, env_items
from pipeline.core.progress import Progress, clock_text
from pipeline.envs.catalog import build_catalog
from pipeline.envs.registry import sources_config
from pipeline.labeling.steps import label
from pipeline.models.agent_settings import AgentSettings
from pipeline.store.layout import DataLayout
from tests.conftest import make_task_file
from tests.support.fake_openai import FakeOpenAI

ROOT = Path(__file__).resolve().parents[2]


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_progress_lines_have_total_rate_and_eta_and_are_rate_limited():
    clock, lines = FakeClock(), []
    p = Progress("bfcl replay", 800, lines.append, unit="trajectories", every=5.0, clock=clock)
    for _ in range(100):  # 100 done in 2 s: under the interval, nothing logged yet
        clock.now += 0.02
        p.advance()
    assert lines == []
    clock.now = 105.0  # 5 s since the start: one line, at 101 done in 5 s
    p.advance()
    assert lines == ["bfcl replay: 101/800 trajectories (12%) 20.2/s ETA 00:35"]  # (800-101)/20.2 = 34.6 s, rounded up
    for _ in range(50):  # within the next 5 s: no line
        clock.now += 0.01
        p.advance()
    assert len(lines) == 1
    clock.now = 116.0
    p.advance(649)  # reaches the total: the last line, with the elapsed time instead of an ETA
    assert (
        len(lines) == 2
        and lines[-1].startswith("bfcl replay: 800/800 trajectories (100%)")
        and lines[-1].endswith("in 00:16")
    )
    p.advance()
    p.finish()
    assert len(lines) == 2  # finished once


def test_progress_eta_math_begin_detail_and_a_phase_ending_short():
    clock, lines = FakeClock(), []
    p = Progress(
        "exploration",
        60_000,
        lines.append,
        unit="calls",
        clock=clock,
        finish_at_total=False,
        detail=lambda: "3/17 coverage targets met",
    )
    clock.now += 50.0  # set up long before its work starts: rates count from begin()
    p.begin()
    assert p.eta() is None and "ETA --:--" in p.line()
    clock.now += 10.0
    p.advance(1_500)
    assert p.rate() == 150.0 and p.eta() == pytest.approx(390.0)
    assert lines == ["exploration: 1,500/60,000 calls (2%) 150.0/s ETA 06:30; 3/17 coverage targets met"]
    clock.now += 20.0
    p.advance(70_000)  # past the total without finishing (the caller finishes with its reason)
    assert "(100%)" in lines[-1] and "ETA 00:00" in lines[-1]
    p.finish("every coverage target met")
    assert lines[-1].endswith("in 00:30; 3/17 coverage targets met, every coverage target met")
    assert clock_text(59.2) == "01:00" and clock_text(3_725) == "1:02:05" and clock_text(0) == "00:00"


def test_a_total_that_may_grow_gives_the_eta_to_its_ceiling_too():
    """Exploration's budget grows while calls find something new: its lines say how long the largest budget would
    take, so the ETA of the budget so far is not read as the end; a total at its ceiling, or one without a
    ceiling, says nothing more."""
    clock, lines = FakeClock(), []
    p = Progress("exploration", 8_000, lines.append, unit="calls", clock=clock, finish_at_total=False, ceiling=50_000)
    clock.now += 10.0
    p.advance(2_000)
    assert lines[-1] == (
        "exploration: 2,000/8,000 calls (25%) 200.0/s ETA 00:30 (up to 04:00 if the total grows to 50,000)"
    )
    p.total = 50_000  # grown to the ceiling: nothing more to say
    clock.now += 10.0
    p.advance(2_000)
    assert lines[-1] == "exploration: 4,000/50,000 calls (8%) 200.0/s ETA 03:50"
    p.finish("every coverage target met")
    assert "up to" not in lines[-1] and " in 00:20" in lines[-1]


def _histories(path: Path) -> Path:
    rows = [
        {
            "task_id": f"h{i}",
            "env_id": "builtin/retail",
            "messages": [
                {"role": "user", "content": "list the products"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": "c1", "type": "function", "function": {"name": "list_products", "arguments": "{}"}}
                    ],
                },
            ],
        }
        for i in range(2)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _math_tasks(tmp_path: Path):
    tasks = [
        {
            "id": f"m{i}",
            "question": [[{"role": "user", "content": "add"}]],
            "initial_config": {},
            "involved_classes": ["MathAPI"],
            "excluded_function": [],
        }
        for i in range(3)
    ]
    return make_task_file(tmp_path, tasks, [{"id": f"m{i}", "ground_truth": [[f"add(a={i}, b=2)"]]} for i in range(3)])


PHASE = re.compile(
    r"^(?P<phase>[a-z -]+): (?P<done>[\d,]+)/(?P<total>[\d,]+) (?P<unit>\w+) \((?P<pct>\d+)%\) [\d,.]+/s (ETA "
    r"\d\d:\d\d|in \d\d:\d\d)"
)


def test_collection_and_labeling_log_every_phase_with_its_total(tmp_path, sandbox):
    """bfcl replay, message-history replay, the agent, exploration and labeling each log a progress line
    with its total; the bfcl replay is not silent."""
    cfg = sources_config(
        bfcl={"categories": [], "task_files": [_math_tasks(tmp_path)]},
        builtin={"scenarios_per_env": 1},
        message_histories=[_histories(tmp_path / "histories.jsonl")],
    )
    layout = DataLayout.at(tmp_path / "data")
    items, issues = env_items(cfg)
    build_catalog(layout, items, issues)
    lines: list[str] = []
    with FakeOpenAI({}, script=lambda body: {"content": "Nothing to do."}) as server:
        agent = AgentRun(
            AgentSettings(model="scripted", base_url=server.url, max_retries=0), ("builtin",), task_limit=2
        )
        result = collect_all(
            cfg,
            layout,
            sandbox,
            ExploreSettings(call_budget=40, batch_episodes=4, min_envs=1),
            log=lines.append,
            agent=agent,
        )
    report = label(layout, sandbox, chunk_size=4, log=lines.append)
    progress = {}
    for line in lines:
        m = PHASE.match(line)
        if m:
            progress.setdefault(m["phase"], []).append(m)
    assert set(progress) == {"bfcl replay", "message-history replay", "agent", "exploration", "labeling"}, lines
    last = {phase: ms[-1] for phase, ms in progress.items()}
    assert (last["bfcl replay"]["done"], last["bfcl replay"]["total"], last["bfcl replay"]["unit"]) == (
        "3",
        "3",
        "trajectories",
    )
    assert (last["message-history replay"]["done"], last["message-history replay"]["total"]) == ("2", "2")
    assert (last["agent"]["done"], last["agent"]["total"], last["agent"]["unit"]) == ("2", "2", "episodes")
    assert last["exploration"]["total"] == "40" and last["exploration"]["unit"] == "calls"
    assert int(last["exploration"]["done"].replace(",", "")) == result.coverage.steps
    assert "coverage targets met" in last["exploration"].string
    total = str(report.trajectories)
    assert (last["labeling"]["done"], last["labeling"]["total"], last["labeling"]["pct"]) == (total, total, "100")
    assert f"{report.steps} steps" in last["labeling"].string
    assert all(len(ms) <= 3 for ms in progress.values())  # rate-limited: a small corpus gets its last line only


def test_the_instance_logs_info_by_default(tmp_path):
    """The project's dagster.yaml (what ``./forge`` puts in ``$DAGSTER_HOME``) sets the default console level
    of every run that names no logger to INFO."""
    from dagster import DagsterInstance
    from dagster._loggers import default_system_loggers

    (tmp_path / "dagster.yaml").write_text((ROOT / "dagster.yaml").read_text())
    with DagsterInstance.from_config(str(tmp_path)) as instance:
        assert instance.python_log_level == "INFO"
        [(_, config)] = default_system_loggers(instance)
        assert config["log_level"] == "INFO"


@pytest.mark.slow
def test_dg_launch_prints_info_and_no_debug_by_default(tmp_path):
    """``dg launch`` (what ``./forge run`` runs) on a cheap asset: INFO lines on the console, no DEBUG ones
    ("Type check passed"); the run config's logger level brings them back."""
    dg = Path(sys.executable).with_name("dg")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENVSIM_")}
    env.update(
        DAGSTER_HOME=str(tmp_path / "home"), ENVSIM_DATA_ROOT=str(tmp_path / "data"), ENVSIM_EXECUTOR="in_process"
    )
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "dagster.yaml").write_text((ROOT / "dagster.yaml").read_text())  # as ./forge sets it up
    base = [str(dg), "launch", "--assets", "environment_catalog", "-m", "assets.definitions"]
    out = subprocess.run(base, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    text = out.stdout + out.stderr
    assert out.returncode == 0, text[-3000:]
    assert " - INFO - " in text and "environments.parquet" in text  # the asset's own INFO line
    assert " - DEBUG - " not in text and "Type check passed" not in text
    debug = json.dumps({"loggers": {"console": {"config": {"log_level": "DEBUG"}}}})
    out = subprocess.run(
        base + ["--config-json", debug], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0 and " - DEBUG - " in out.stdout + out.stderr
