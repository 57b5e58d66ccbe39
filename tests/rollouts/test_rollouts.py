"""Simulated rollouts in closed loop with an executor shadow, against the local OpenAI-compatible fake,
and their export as Simia-style agent SFT data."""

import asyncio
import functools
import json

import duckdb
import pyarrow.parquet as pq
import pytest

from pipeline.core.protocol import answer
from pipeline.envs.catalog import load_blobs
from pipeline.envs.registry import sources_config
from pipeline.evaluate.simulators import SimulatorSpec, make_simulator, simulator_spec
from pipeline.models.agent_settings import AgentSettings
from pipeline.rollouts import store
from pipeline.rollouts.loop import RolloutTask, simulate
from pipeline.rollouts.sft import export_rollouts
from pipeline.rollouts.shadow import shadow_all
from tests.support.fake_openai import FakeOpenAI
from tests.support.layouts import collected_builtin
from tests.support.metadata import text


@pytest.fixture(scope="module")
def layout(tmp_path_factory, sandbox):
    layout = collected_builtin(
        tmp_path_factory.mktemp("rollouts") / "data", sandbox, scenarios_per_env=2, call_budget=300, batch_episodes=20
    )
    load_blobs(layout)
    return layout


def _run(layout, sandbox, tasks, spec, name=None, **kw):
    sim = make_simulator(spec)
    run = f"{name or spec.name}@recorded"
    steps, rollouts, report = asyncio.run(
        simulate(tasks, sim, sandbox, store.run_dir(layout, run) / "requests.jsonl", **kw)
    )
    store.write_run(layout, report.run_id, steps, rollouts)
    return steps, rollouts, report


@functools.cache
def _source_turns():
    """The user turns of the tasks of the sources the layout was collected from (its builtin scenarios)."""
    from pipeline.collect.sources import SourceConfig, env_items, task_turns

    cfg = sources_config(bfcl={"replay": False}, builtin={"scenarios_per_env": 2})
    return task_turns(cfg, env_items(cfg)[0])


def _changing_task(layout, sandbox, min_changes=3):
    """A recorded task (with its question) whose steps change the state at least ``min_changes`` times."""
    for task in store.recorded_tasks(layout, limit=60, min_steps=6, questions=_source_turns()):
        real = shadow_all(sandbox, [(task.key, task.task_id, task.env, task.actions)])[task.key]
        if sum(real.steps[i]["delta_size"] > 0 for i in real.steps) >= min_changes:
            return task, real
    raise AssertionError("no recorded task with enough state changes")


def _answers(task, real):
    return [
        answer({"delta": real.steps[i]["delta"], "raw_observation": real.steps[i]["raw_observation"]})
        for i in range(len(task.actions))
    ]


class StepScript:
    """A simulator endpoint: the executor's answer at every step (requests arrive in step order for one
    rollout), except a spurious extra change at step ``wrong``, or an HTTP 500 at request ``fail``."""

    def __init__(self, answers, wrong=None, fail=None):
        self.answers, self.wrong, self.fail = answers, wrong, fail
        self.seen = []

    def __call__(self, body):
        prompt = body["messages"][-1]["content"]
        index = len(self.seen)
        self.seen.append(prompt)
        if self.fail is not None and index == self.fail:
            self.seen.pop()
            return 500, {"error": {"message": "boom", "type": "server_error"}}
        text = self.answers[index]
        if index == self.wrong:
            obj = json.loads(text)
            obj["config_changes"].append({"type": "add", "path": ["zz_spurious"], "value": 1})
            text = json.dumps(obj)
        return {"content": text}


def test_oracle_has_zero_drift_and_no_change_drift_grows(layout, sandbox):
    tasks = store.recorded_tasks(layout, limit=12)
    o_steps, o_rollouts, o_report = _run(layout, sandbox, tasks, SimulatorSpec(name="oracle", kind="oracle"))
    n_steps, _, _ = _run(layout, sandbox, tasks, SimulatorSpec(name="no_change", kind="no_change"))
    assert o_report.statuses == {"done": 12} and o_report.steps == sum(len(t.actions[:12]) for t in tasks)
    assert all(s["drift"] == 0 and s["fm"] and s["cm"] and not s["diverged_before"] for s in o_steps)
    assert all(r["first_divergence"] is None and r["final_drift"] == 0 for r in o_rollouts)
    con = duckdb.connect()
    assert store.sync(con, layout)
    by_step = dict(
        con.execute("SELECT step_index, mean_drift FROM rollout_by_step WHERE run_id = 'no_change@recorded'").fetchall()
    )
    assert by_step[0] < by_step[5] < by_step[max(by_step)]
    assert max(by_step.values()) > 2
    assert (
        con.execute("SELECT max(mean_drift) FROM rollout_by_step WHERE run_id = 'oracle@recorded'").fetchone()[0] == 0
    )
    # views by simulator, |Δ| bucket, environment exist and agree on the step count
    for view in ("rollout_by_simulator", "rollout_by_delta", "rollout_by_env"):
        assert con.execute(f"SELECT sum(steps) FROM {view} WHERE run_id = 'oracle@recorded'").fetchone()[0] == len(
            o_steps
        )
    assert len(n_steps) == len(o_steps)
    png = store.drift_plot(con, ["oracle@recorded", "no_change@recorded"], layout.root / "rollouts" / "drift.png")
    assert len(png) > 1000
    # same input, same bytes
    before = (store.run_dir(layout, "oracle@recorded") / "steps.parquet").read_bytes()
    _run(layout, sandbox, tasks, SimulatorSpec(name="oracle", kind="oracle"))
    assert (store.run_dir(layout, "oracle@recorded") / "steps.parquet").read_bytes() == before


def test_one_wrong_update_is_the_first_divergence_and_persists(layout, sandbox):
    task, real = _changing_task(layout, sandbox)
    k = 2
    script = StepScript(_answers(task, real), wrong=k)
    with FakeOpenAI({}, script=script) as server:
        spec = simulator_spec(name="wrong-at-2", kind="openai", model="m", base_url=server.url, max_retries=0)
        steps, rollouts, report = _run(layout, sandbox, [task], spec)
    assert report.statuses == {"done": 1} and report.asked == len(task.actions)
    [ro] = rollouts
    assert ro["first_divergence"] == k and ro["final_drift"] >= 1 and ro["verified_steps"] == k
    for s in steps:
        assert s["cm"] is (s["step_index"] != k)
        assert (s["drift"] > 0) is (s["step_index"] >= k)  # the drift persists after the wrong update
        assert s["diverged_before"] is (s["step_index"] > k)

    # SFT export: all keeps it whole, verified drops it, prefix cuts it before step k
    files = [store.run_dir(layout, "wrong-at-2@recorded") / "rollouts.parquet"]
    out = layout.root / "export"
    every = export_rollouts(files, out / "all", "all")
    assert every["kept"] == 1 and every["steps_kept"] == len(task.actions)
    verified = export_rollouts(files, out / "verified", "verified")
    card = (out / "verified" / "README.md").read_text()
    assert verified["kept"] == 0 and verified["dropped"] == 1 and "1 dropped" in card and "`verified`" in card
    prefix = export_rollouts(files, out / "prefix", "prefix")
    assert prefix["kept"] == 1 and prefix["steps_kept"] == k and prefix["steps_dropped"] == len(task.actions) - k
    [record] = pq.read_table(out / "prefix" / "data" / "train-00000-of-00001.parquet").to_pylist()
    calls = [m for m in record["messages"] if m["role"] == "assistant"]
    tools = [m for m in record["messages"] if m["role"] == "tool"]
    assert len(calls) == len(tools) == k and calls[0]["tool_calls"][0]["function"]["name"] == task.actions[0].name
    assert [m["content"] for m in record["messages"] if m["role"] == "user"] == list(task.turns) and task.turns
    feedback = json.loads(_answers(task, real)[0])["feedback"]  # the agent saw the simulator's feedback
    assert tools[0]["content"] == (feedback if isinstance(feedback, str) else json.dumps(feedback, ensure_ascii=False))
    from datasets import load_dataset

    ds = load_dataset(str(out / "all"), split="train", cache_dir=str(layout.root / "hf-cache"))
    assert ds.num_rows == 1 and ds[0]["messages"][0]["role"] == "system"


def test_garbage_answers_are_counted_parse_failures_and_stop_the_rollout(layout, sandbox):
    tasks = store.recorded_tasks(layout, limit=3)
    with FakeOpenAI({}, mode="garbage") as server:
        spec = simulator_spec(name="garbage", kind="openai", model="m", base_url=server.url, max_retries=0)
        steps, rollouts, report = _run(layout, sandbox, tasks, spec)
        assert server.requests == 3
    assert report.statuses == {"parse_failure": 3} and report.parse_failures == 3
    assert all(r["steps"] == 1 and r["parse_failures"] == 1 and "step 0" in r["stop_reason"] for r in rollouts)
    assert all(not s["parse_ok"] and s["parse_error"] and s["drift"] is None for s in steps)


def test_a_resumed_run_asks_nothing_twice(layout, sandbox):
    task, real = _changing_task(layout, sandbox)
    answers = _answers(task, real)
    n = len(task.actions)
    first = StepScript(answers, fail=3)
    with FakeOpenAI({}, script=first) as server:
        spec = simulator_spec(name="resumable", kind="openai", model="m", base_url=server.url, max_retries=0)
        _, rollouts, report = _run(layout, sandbox, [task], spec)
    assert report.statuses == {"request_error": 1} and report.asked == 4 and rollouts[0]["steps"] == 3
    second = StepScript(answers[3:])
    with FakeOpenAI({}, script=second) as server:
        spec = simulator_spec(name="resumable", kind="openai", model="m", base_url=server.url, max_retries=0)
        steps, rollouts, report = _run(layout, sandbox, [task], spec)
    assert report.asked == n - 3 and report.reused == 3 and len(second.seen) == n - 3
    assert not set(first.seen) & set(second.seen)  # no prompt answered in the first run was asked again
    assert report.statuses == {"done": 1} and all(s["drift"] == 0 for s in steps) and len(steps) == n
    with FakeOpenAI({}, script=StepScript([])) as server:
        spec = simulator_spec(name="resumable", kind="openai", model="m", base_url=server.url, max_retries=0)
        _, _, report = _run(layout, sandbox, [task], spec)
        assert server.requests == 0 and report.asked == 0 and report.reused == n


def test_llm_agent_acts_on_simulated_observations(layout, sandbox):
    """An LLM agent (scripted endpoint) calls tools; the oracle simulator answers; the executor shadows."""
    task = store.recorded_tasks(layout, limit=1, min_steps=3)[0]
    calls = task.actions[:3]

    def agent(body):
        n = sum(1 for m in body["messages"] if m["role"] == "assistant")
        assert body["tools"] and body["messages"][-1]["role"] in ("user", "tool")
        if n < len(calls):
            a = calls[n]
            return {
                "tool_calls": [
                    {
                        "id": f"c{n}",
                        "type": "function",
                        "function": {"name": a.name, "arguments": json.dumps(a.arguments)},
                    }
                ]
            }
        return {"content": "done"}

    with FakeOpenAI({}, script=agent) as server:
        settings = AgentSettings(model="scripted", base_url=server.url, max_retries=0)
        llm_task = RolloutTask(task.key, task.task_id, task.env, turns=("Do the task.",))
        sim = make_simulator(SimulatorSpec(name="oracle", kind="oracle"))
        steps, rollouts, report = asyncio.run(
            simulate([llm_task], sim, sandbox, layout.root / "agent-rollouts.jsonl", agent=settings)
        )
        asked = server.requests
    assert report.statuses == {"done": 1} and len(steps) == 3 and asked == 4
    assert all(s["drift"] == 0 and s["fm"] for s in steps)
    messages = json.loads(rollouts[0]["messages_json"])
    assert [m["role"] for m in messages] == ["system", "user"] + ["assistant", "tool"] * 3 + ["assistant"]


def _catalog_tools(layout):
    """Tool schemas per environment, as the catalog (``environments.parquet``) holds them."""
    return {
        r["env_id"]: json.loads(r["tools_json"])
        for r in pq.read_table(layout.environments, columns=["env_id", "tools_json"]).to_pylist()
    }


def _scenario_questions(per_env=2):
    """The builtin scenarios' task text by task id (what the layout's trajectories were collected for)."""
    from pipeline.envs import builtin

    return {sc["task_id"]: sc["task"] for sc in builtin.scenarios(per_env)}


def _records(directory):
    return [r for f in sorted((directory / "data").glob("*.parquet")) for r in pq.read_table(f).to_pylist()]


def test_sft_records_carry_the_tasks_tool_schemas_and_user_turns(layout, sandbox):
    """Issue 25 B: every record carries the tool schemas the agent was given (the environment's, as the
    catalog has them) and the task's real question as its user turn."""
    tasks = store.recorded_tasks(layout, limit=6, questions=_source_turns())
    questions = _scenario_questions()
    assert [t.turns for t in tasks] == [(questions[t.task_id],) for t in tasks]
    _run(layout, sandbox, tasks, SimulatorSpec(name="oracle", kind="oracle"), name="oracle-sft")
    out = layout.root / "export" / "sft-records"
    report = export_rollouts([store.run_dir(layout, "oracle@recorded") / "rollouts.parquet"], out, "all")
    records, catalog = _records(out), _catalog_tools(layout)
    assert report["kept"] == len(records) == 6 and report["without_question"] == 0
    for record in records:
        assert catalog[record["env_id"]] and json.loads(record["tools"]) == catalog[record["env_id"]]
        assert [m["role"] for m in record["messages"][:3]] == ["system", "user", "assistant"]
        assert [m["content"] for m in record["messages"] if m["role"] == "user"] == [questions[record["task_id"]]]
    # a task whose question no source has: its rollout has no user turn and is not exported, but counted
    unknown = store.recorded_tasks(layout, limit=2)
    assert all(t.turns == () for t in unknown)
    _run(layout, sandbox, unknown, SimulatorSpec(name="oracle", kind="oracle"), name="oracle-unasked")
    report = export_rollouts([store.run_dir(layout, "oracle@recorded") / "rollouts.parquet"], out, "all")
    assert (report["kept"], report["without_question"], report["dropped"]) == (0, 2, 2)
    assert "2 because their task's question" in (out / "README.md").read_text()


def test_recorded_turns_and_an_llm_agent_without_a_question(layout, sandbox):
    history = json.dumps(
        [
            {"role": "system", "content": "s"},
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": None, "tool_calls": []},
            {"role": "user", "content": [{"type": "text", "text": "sec"}, {"type": "text", "text": "ond"}]},
        ]
    )
    assert store.recorded_turns(history) == ("first", "second") and store.recorded_turns(None) == ()
    task = store.recorded_tasks(layout, limit=1)[0]
    sim = make_simulator(SimulatorSpec(name="oracle", kind="oracle"))
    settings = AgentSettings(model="never-asked", base_url="http://127.0.0.1:9/v1", max_retries=0)
    _, rollouts, report = asyncio.run(
        simulate(
            [RolloutTask(task.key, task.task_id, task.env)],
            sim,
            sandbox,
            layout.root / "unasked-agent.jsonl",
            agent=settings,
        )
    )
    assert report.statuses == {"agent_error": 1} and report.asked == 0 and "no user turn" in rollouts[0]["stop_reason"]


def test_assets_materialize_with_metadata_and_oracle_check(layout, tmp_path):
    import shutil

    from dagster import materialize
    from dagster_duckdb import DuckDBResource

    from assets.simulation import rollout_sft_dataset, simulated_rollouts
    from resources import DataStoreResource, EnvironmentSourcesResource, SandboxResource

    root = tmp_path / "data"  # a copy without the rollouts earlier tests of this module recorded
    shutil.copytree(layout.root, root, ignore=shutil.ignore_patterns("rollouts"))
    resources = {
        "store": DataStoreResource(data_root=str(root)),
        "sources": EnvironmentSourcesResource(),
        "sandbox": SandboxResource(workers=2),
        "duckdb": DuckDBResource(database=str(tmp_path / "envsim.duckdb")),
    }
    result = materialize(
        [simulated_rollouts, rollout_sft_dataset],
        resources=resources,
        run_config={
            "ops": {
                "simulated_rollouts": {"config": {"task_limit": 8}},
                "rollout_sft_dataset": {"config": {"filter": "verified", "directory": str(tmp_path / "sft")}},
            }
        },
    )
    assert result.success
    meta = {
        e.asset_key.to_user_string(): e.event_specific_data.materialization.metadata
        for e in result.get_asset_materialization_events()
    }
    assert meta["simulated_rollouts"]["rollout_tasks"].value == 8
    assert "oracle@recorded" in text(meta["simulated_rollouts"]["summary"])
    assert meta["simulated_rollouts"]["drift_by_step"].value.startswith("![drift vs step](data:image/png;base64,")
    # the baselines only: the oracle's 8 rollouts are verified, no_change's that drifted are dropped
    assert meta["rollout_sft_dataset"]["kept"].value >= 8 and meta["rollout_sft_dataset"]["dropped"].value >= 1
    assert {c.check_name: c.passed for c in result.get_asset_check_evaluations()} == {"oracle_never_drifts": True}
    # every record: the environment's tool schemas and the task's own question (from the configured sources)
    records, catalog, questions = _records(tmp_path / "sft"), _catalog_tools(layout), _scenario_questions()
    assert (
        len(records)
        == meta["rollout_sft_dataset"]["kept"].value
        == meta["rollout_sft_dataset"]["dagster/row_count"].value
    )
    assert (
        meta["simulated_rollouts"]["dagster/row_count"].value > 0
        and meta["simulated_rollouts"]["dagster/column_schema"]
    )
    for record in records:
        assert catalog[record["env_id"]] and json.loads(record["tools"]) == catalog[record["env_id"]]
        assert [m["content"] for m in record["messages"] if m["role"] == "user"] == [questions[record["task_id"]]]
    assert meta["rollout_sft_dataset"]["without_question"].value == 0
    with duckdb.connect(str(tmp_path / "envsim.duckdb"), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM rollouts WHERE run_id = 'oracle@recorded'").fetchone()[0] == 8
