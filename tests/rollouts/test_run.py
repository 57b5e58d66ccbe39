"""A rollout run as the ``simulated_rollouts`` asset runs it, without Dagster: its tasks, each simulator's run
written, what it reports and the oracle's drift check (pipeline/rollouts/run.py)."""

import duckdb
import pytest

from pipeline.collect.sources import SourceConfig, agent_tasks, env_items, task_turns
from pipeline.envs.catalog import load_blobs
from pipeline.envs.registry import sources_config
from pipeline.evaluate.simulators import SimulatorSpec
from pipeline.report.tables import Markdown, Table
from pipeline.rollouts import store
from pipeline.rollouts.run import oracle_check, roll_out, rollout_facts, rollout_files, rollout_tasks
from tests.support.layouts import collected_builtin


@pytest.fixture(scope="module")
def layout(tmp_path_factory, sandbox):
    layout = collected_builtin(
        tmp_path_factory.mktemp("rollout-run") / "data",
        sandbox,
        scenarios_per_env=2,
        call_budget=300,
        batch_episodes=20,
    )
    load_blobs(layout)
    return layout


def _steps(con, rows):
    con.execute("CREATE OR REPLACE TABLE rollout_steps (run_id VARCHAR, simulator VARCHAR, drift INT, fm BOOLEAN)")
    con.executemany("INSERT INTO rollout_steps VALUES (?, ?, ?, ?)", rows)


def test_the_oracle_check_fails_on_any_drift_or_mismatch_and_passes_when_not_rolled_out():
    con = duckdb.connect()
    _steps(con, [("oracle@recorded", "oracle", 0, True), ("oracle@recorded", "oracle", 0, True)])
    assert oracle_check(con, ["oracle@recorded"]).passed
    assert oracle_check(con, ["oracle@recorded"]).description == "2 steps, max drift 0"
    _steps(con, [("oracle@recorded", "oracle", 0, True), ("oracle@recorded", "oracle", 3, True)])
    check = oracle_check(con, ["oracle@recorded"])
    assert not check.passed and check.description == "2 steps, max drift 3"
    _steps(con, [("oracle@recorded", "oracle", 0, False)])
    assert not oracle_check(con, ["oracle@recorded"]).passed
    # a drifting oracle of another run, or another simulator's drift, is not this run's oracle
    _steps(con, [("oracle@old", "oracle", 5, False), ("no_change@recorded", "no_change", 4, False)])
    check = oracle_check(con, ["oracle@recorded", "no_change@recorded"])
    assert check.passed and check.description == "oracle was not rolled out"


def test_recorded_tasks_rolled_out_by_each_simulator_and_reported(layout, sandbox):
    cfg = sources_config(bfcl={"replay": False}, builtin={"scenarios_per_env": 2})
    tasks, warnings = rollout_tasks(layout, None, task_turns(cfg, env_items(cfg)[0]), 6, 0, [], 1)
    assert len(tasks) == 6 and warnings == []
    assert all(t.turns for t in tasks)  # every recorded task's question is known to the configured sources
    logged, specs = [], [SimulatorSpec(name="oracle", kind="oracle"), SimulatorSpec(name="no_change", kind="no_change")]
    run_ids = roll_out(layout, sandbox, tasks, specs, None, 8, log=logged.append)
    assert run_ids == ["oracle@recorded", "no_change@recorded"]
    assert [line.split(":")[0] for line in logged] == run_ids and "6 rollouts" in logged[0]
    assert {f.parent.name for f in rollout_files(layout)} >= {store.run_dir(layout, r).name for r in run_ids}
    con = duckdb.connect()
    facts, oracle = rollout_facts(con, layout, run_ids, len(tasks))
    assert list(facts.values) == ["rollout_tasks", "summary", "drift_by_step", "plot_path"]
    assert facts.values["rollout_tasks"] == 6
    summary = facts.values["summary"]
    assert isinstance(summary, Table) and sorted(r["run_id"] for r in summary.rows) == sorted(run_ids)
    assert isinstance(facts.values["drift_by_step"], Markdown)
    assert facts.values["drift_by_step"].text.startswith("![drift vs step](data:image/png;base64,")
    assert facts.values["plot_path"].is_absolute() and facts.values["plot_path"].exists()
    assert oracle.passed and oracle.description.endswith("max drift 0")


def test_an_llm_agents_tasks_are_rolled_out_as_picked_with_their_questions(layout):
    cfg = sources_config(bfcl={"replay": False}, builtin={"scenarios_per_env": 2})
    picked = agent_tasks(cfg, env_items(cfg)[0], ["builtin"], 3)
    tasks, warnings = rollout_tasks(layout, picked, None, 40, 0, [], 2)
    assert warnings == [] and [t.key for t in tasks] == [t.task_id for t in picked]
    assert [(t.env, t.turns, t.actions) for t in tasks] == [(p.env, tuple(p.turns), ()) for p in picked]
