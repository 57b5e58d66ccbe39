"""Agent collection and simulated rollouts with a real model: SmolLM2-135M-Instruct (the embedded base model,
converted from its pinned wheel) served by ``llamafactory-cli api`` on CPU, with no fake anywhere.

A 135M model is a weak agent: it mostly answers in prose (or code) instead of calling a tool, and when it does
call one it may invent a tool name. What these tests prove is that such a model's answers are recorded for what
they are — a valid call executed in the sandbox, an invalid call with its reason, an answer without a tool call
with its reason — that nothing crashes, and that the model as a simulator has its (wrong) predictions and the
executor shadow's drift recorded. Requests are kept tiny (one short task turn, at most 32 new tokens per agent
answer, 32 per simulator answer): on two loaded CPUs each takes tens of seconds.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from pipeline.collect.agent import (
    INVALID_CALLS,
    AgentTask,
    actions_from_messages,
    collect_agent,
    episode_trajectory,
    tally,
)
from pipeline.collect.collector import collect
from pipeline.collect.sources import SourceConfig, agent_tasks, env_items
from pipeline.envs import registry
from pipeline.envs.catalog import build_catalog
from pipeline.envs.registry import sources_config
from pipeline.execution.sandbox import Sandbox
from pipeline.models.agent_settings import AgentSettings
from pipeline.store.layout import DataLayout
from tests.e2e.test_real_model import converted_once

pytestmark = pytest.mark.slow

MODEL = "smollm2-135m-instruct"
SERVED = "smollm2"
SOURCES = sources_config(bfcl={"replay": False}, builtin={"scenarios_per_env": 1})
#: what a weak model needs to make any call at all: the tool format LLaMA-Factory's api parses, spelled out
INSTRUCTED = (
    'Call get_book for book BK001. Answer only in this format:\nAction: get_book\nAction Input: {"book_id": "BK001"}'
)


def recorded_actions(row: dict[str, Any]) -> list[Any]:
    """The actions a recorded episode executed (re-derived from its messages)."""
    return actions_from_messages(row["messages"])[0]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The converted model, served once for this module; yields its OpenAI-compatible base URL."""
    from pipeline.training.base_models import EMBEDDED, materialize
    from pipeline.training.launchers import find_llamafactory
    from pipeline.training.serve import ServeSpec, serve

    try:
        python, cli = find_llamafactory()
    except FileNotFoundError as exc:
        pytest.skip(f"no LLaMA-Factory environment to serve the model ({exc})")
    root = tmp_path_factory.mktemp("real-model")
    checkpoint = converted_once(tmp_path_factory, python, root / "data")  # converted once for the run
    assert materialize(MODEL, root / "data", python) == checkpoint
    spec = ServeSpec(
        model_name_or_path=str(checkpoint),
        template=EMBEDDED[MODEL].template,
        served_name=SERVED,
        backend="huggingface",
        llamafactory_cli=cli,
        llamafactory_python=python,
        ready_timeout_s=600,
    )
    with serve(spec, root / "serve") as server:
        yield server.base_url


@pytest.fixture(scope="module")
def agent_run(
    served: str, tmp_path_factory: pytest.TempPathFactory, sandbox: Sandbox, monkeypatch_module: None
) -> dict[str, Any]:
    """The real model as the agent on two library tasks — the builtin pack's own task, and one that spells out
    the tool format — collected as :func:`pipeline.collect.run.collect_all` does (a resumable record, then the
    trajectories table)."""
    layout = DataLayout.at(tmp_path_factory.mktemp("real-agent") / "data")
    items, issues = env_items(SOURCES)
    build_catalog(layout, items, issues)
    pack = next(t for t in agent_tasks(SOURCES, items, ["builtin"], None) if t.env.env_id == "builtin/library")
    tasks = [pack, AgentTask("library-instructed", pack.env, [INSTRUCTED])]
    settings = AgentSettings(
        model=SERVED, base_url=served, max_tokens=32, step_limit=2, concurrency=1, timeout_s=600, max_retries=2
    )
    rows = asyncio.run(collect_agent(tasks, settings, sandbox, layout.agent_record(SERVED)))
    report = collect([episode_trajectory(r, SERVED) for r in rows], layout, sandbox)
    return {
        "layout": layout,
        "rows": rows,
        "report": report,
        "tools": {t["function"]["name"] for t in registry.tool_schemas(pack.env)},
    }


@pytest.fixture(scope="module")
def monkeypatch_module() -> Iterator[None]:
    """The API key the OpenAI client insists on (the local server ignores it)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OPENAI_API_KEY", "local")
        yield


def test_agent_collection_records_every_answer_for_what_it_is(agent_run: dict[str, Any]) -> None:
    rows, tools = agent_run["rows"], agent_run["tools"]
    assert [r["task_id"] for r in rows] == ["builtin-library-s0-00000", "library-instructed"]
    totals = {"valid": 0, "invalid": 0, "no_tool_call": 0}
    for row in rows:
        assert row["status"] in ("done", "step_limit"), row["events"]
        assert all(e.get("reason") for e in row["events"]), row["events"]
        kinds = [e["kind"] for e in row["events"]]
        answers = [m for m in row["messages"] if m["role"] == "assistant"]
        # every answer without a tool call is an event saying why (absent, or a call the endpoint did not parse)
        without = [m for m in answers if not m.get("tool_calls")]
        assert len(without) == kinds.count("no_tool_call") + kinds.count("unparsed_tool_call")
        # every tool call got its tool message back; an unknown tool is an event naming it
        calls = [c for m in answers for c in m.get("tool_calls") or []]
        results = {m["tool_call_id"]: m["content"] for m in row["messages"] if m["role"] == "tool"}
        assert {c["id"] for c in calls} == set(results)
        unknown = [c["function"]["name"] for c in calls if c["function"]["name"] not in tools]
        assert sorted(unknown) == sorted(e["tool"] for e in row["events"] if e["kind"] == "unknown_tool")
        for name in unknown:
            assert any(f"unknown tool '{name}'" in results[c["id"]] for c in calls if c["function"]["name"] == name)
        if row["status"] == "step_limit":
            assert len(calls) - kinds.count("malformed_arguments") == 2 and "step_limit" in kinds
        counts = tally(row)
        assert counts["answers"] == len(answers) and counts["tool_calls"] == len(calls)
        assert counts["invalid"] == sum(kinds.count(k) for k in INVALID_CALLS)
        for key in totals:
            totals[key] += counts[key]
    # the weak model: the spelled-out call is made and executed for real ...
    instructed = rows[1]
    first = instructed["messages"][2]
    assert first["tool_calls"][0]["function"]["name"] == "get_book"
    assert json.loads(first["tool_calls"][0]["function"]["arguments"]) == {"book_id": "BK001"}
    assert "Emma" in instructed["messages"][3]["content"]  # the real environment's observation
    # ... and the rest of what it does is recorded as invalid or absent tool calls, never silently dropped
    assert totals["valid"] >= 1 and totals["invalid"] + totals["no_tool_call"] >= 1, totals


def test_agent_trajectories_are_collected_and_resumable(agent_run: dict[str, Any], sandbox: Sandbox) -> None:
    layout: DataLayout = agent_run["layout"]
    table = {r["task_id"]: r for r in pq.read_table(layout.trajectories).to_pylist()}
    assert set(table) == {r["task_id"] for r in agent_run["rows"]} and agent_run["report"].issues == []
    for row in agent_run["rows"]:
        stored = table[row["task_id"]]
        counts = tally(row)
        executed = counts["tool_calls"] - sum(e["kind"] == "malformed_arguments" for e in row["events"])
        assert stored["strategy"] == "agent" and stored["num_actions"] == executed
        assert json.loads(stored["messages_json"]) == row["messages"]
    # the record is resumable: a second run asks the model nothing (its endpoint is not even reachable)
    settings = AgentSettings(model=SERVED, base_url="http://127.0.0.1:9/v1", max_retries=0, timeout_s=5)
    pack = [AgentTask(r["task_id"], episode_trajectory(r, SERVED).env, ["unused"]) for r in agent_run["rows"]]
    again = asyncio.run(collect_agent(pack, settings, sandbox, layout.agent_record(SERVED)))
    assert again == agent_run["rows"]


def test_simulated_rollouts_with_the_real_model_as_simulator(
    agent_run: dict[str, Any], served: str, tmp_path: Path
) -> None:
    """``simulated_rollouts`` over the agent's recorded trajectory, the real model and the oracle as simulators."""
    from dagster import materialize
    from dagster_duckdb import DuckDBResource

    from assets.simulation import simulated_rollouts
    from pipeline.rollouts import store as rollout_store
    from resources import DataStoreResource, EnvironmentSourcesResource, SandboxResource

    layout: DataLayout = agent_run["layout"]
    resources = {
        "store": DataStoreResource(data_root=str(layout.root)),
        "sources": EnvironmentSourcesResource(bfcl={"replay": False}, builtin={"scenarios_per_env": 1}),
        "sandbox": SandboxResource(workers=1),
        "duckdb": DuckDBResource(database=str(tmp_path / "envsim.duckdb")),
    }
    simulators = [
        {
            "name": SERVED,
            "kind": "openai",
            "concurrency": 1,
            "openai": {"model": SERVED, "base_url": served, "max_tokens": 32, "timeout_s": 600, "max_retries": 2},
        },
        {"name": "oracle", "kind": "oracle"},
    ]
    result = materialize(
        [simulated_rollouts],
        resources=resources,
        run_config={
            "ops": {
                "simulated_rollouts": {
                    "config": {"simulators": simulators, "task_limit": 1, "min_steps": 1, "max_steps": 2}
                }
            }
        },
    )
    assert result.success
    assert {c.check_name: c.passed for c in result.get_asset_check_evaluations()} == {"oracle_never_drifts": True}

    def run(name: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        directory = rollout_store.run_dir(layout, f"{name}@recorded")
        [rollout] = pq.read_table(directory / "rollouts.parquet").to_pylist()
        return pq.read_table(directory / "steps.parquet").to_pylist(), rollout

    steps, rollout = run(SERVED)
    recorded = next(r for r in agent_run["rows"] if r["task_id"] == rollout["task_id"])  # the trajectory rolled out
    first_call = next(m for m in recorded["messages"] if m.get("tool_calls"))["tool_calls"][0]["function"]["name"]
    assert steps and steps[0]["tool"] == first_call
    assert steps[0]["drift_before"] == 0  # the simulator starts from the real initial state
    for step in steps:
        assert step["answer"] and 0 < step["completion_tokens"] <= 32  # its prediction, whatever it is, is kept
        if step["parse_ok"]:
            assert step["drift"] is not None and step["drift"] >= 0 and step["feedback_json"] is not None
        else:
            assert step["parse_error"] and step["drift"] is None
    if rollout["status"] == "parse_failure":
        assert rollout["stop_reason"] == f"step {steps[-1]['step_index']}: {steps[-1]['parse_error']}"
        assert rollout["parse_failures"] == 1 and rollout["verified_steps"] < len(steps)
    else:
        assert rollout["final_drift"] == steps[-1]["drift"]
    # the executor shadow over the same actions: the oracle never drifts, the real observation is recorded
    oracle_steps, oracle = run("oracle")
    assert oracle["status"] == "done" and [s["drift"] for s in oracle_steps] == [0] * len(oracle_steps)
    assert len(oracle_steps) == len(recorded_actions(recorded)) and oracle_steps[0]["outcome"] == steps[0]["outcome"]
    assert steps[0]["real_observation"] == oracle_steps[0]["real_observation"]
