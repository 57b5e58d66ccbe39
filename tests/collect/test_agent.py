"""Agent collection through a local OpenAI-compatible server that plays a scripted agent."""

import json

import pyarrow.parquet as pq
import pytest

from pipeline.collect.agent import actions_from_messages
from pipeline.collect.run import AgentRun, collect_all
from pipeline.collect.sources import SourceConfig, env_items
from pipeline.envs.catalog import build_catalog
from pipeline.envs.registry import sources_config
from pipeline.labeling.steps import label
from pipeline.models.agent_settings import AgentSettings
from pipeline.store.layout import DataLayout
from pipeline.store.reconstruct import verify_steps
from tests.support.fake_openai import FakeOpenAI


def _call(i, name, args):
    return {
        "id": f"call_{i}",
        "type": "function",
        "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)},
    }


class ScriptedAgent:
    """Per task (found in the first user message): a list of replies, played in order."""

    def __init__(self):
        self.calls = 0
        self.rate_limited = False

    def __call__(self, body):
        self.calls += 1
        messages = body["messages"]
        task = next(m["content"] for m in messages if m["role"] == "user")
        n_assistant = sum(1 for m in messages if m["role"] == "assistant")
        assert body["tools"] and body["tools"][0]["type"] == "function"
        if "Help customer" in task:  # retail: correct calls, unknown tool, bad JSON, a parallel call, then done
            script = [
                {"tool_calls": [_call(1, "list_products", {})]},
                {"tool_calls": [_call(2, "teleport", {"where": "moon"})]},
                {"tool_calls": [_call(3, "get_customer", "{not json")]},
                {
                    "tool_calls": [
                        _call(4, "get_product", {"product_id": "P001"}),
                        _call(5, "add_to_cart", {"customer_id": "C001", "product_id": "P001", "quantity": 1}),
                    ]
                },
                {"content": "Done: the item is in the cart."},
            ]
            return script[min(n_assistant, len(script) - 1)]
        if "Passenger" in task:  # airline: a 429 first, then an answer without tools
            if not self.rate_limited:
                self.rate_limited = True
                return 429, {"error": {"message": "slow down", "type": "rate_limit"}}
            return {"content": "I cannot help with that."}
        return {"tool_calls": [_call(n_assistant, "list_doctors", {})]}  # clinic: an endless loop


@pytest.fixture(scope="module")
def agent_run(tmp_path_factory, sandbox):
    layout = DataLayout.at(tmp_path_factory.mktemp("agent") / "data")
    cfg = sources_config(bfcl={"replay": False}, builtin={"scenarios_per_env": 1})
    items, issues = env_items(cfg)
    build_catalog(layout, items, issues)
    script = ScriptedAgent()
    with FakeOpenAI({}, script=script) as server:
        settings = AgentSettings(model="scripted", base_url=server.url, step_limit=5, max_retries=2, concurrency=3)
        run = AgentRun(settings, ("builtin",), task_limit=3)  # retail, airline, clinic
        result = collect_all(cfg, layout, sandbox, None, agent=run)
        again = collect_all(cfg, layout, sandbox, None, agent=run)  # resumes: nothing asked twice
        calls_after_second_run = script.calls
    label(layout, sandbox)
    return layout, result, again, script, calls_after_second_run


def test_episodes_are_recorded_with_their_events(agent_run):
    _, result, _, _, _ = agent_run
    episodes = {r["task_id"].split("-")[1]: r for r in result.agent_episodes}
    assert set(episodes) == {"retail", "airline", "clinic"}
    retail = episodes["retail"]
    kinds = [e["kind"] for e in retail["events"]]
    assert retail["status"] == "done" and "unknown_tool" in kinds and "malformed_arguments" in kinds
    assert retail["messages"][-1] == {"role": "assistant", "content": "Done: the item is in the cart."}
    assert episodes["airline"]["status"] == "done"  # the 429 was retried by the client
    assert episodes["clinic"]["status"] == "step_limit"


def test_resume_asks_the_model_nothing_twice(agent_run):
    _, result, again, script, calls = agent_run
    assert again.agent_episodes == result.agent_episodes
    assert script.calls == calls


def test_agent_steps_are_labeled_with_their_history(agent_run):
    layout, _, _, _, _ = agent_run
    rows = {
        r["task_id"].split("-")[1]: r
        for r in pq.read_table(layout.trajectories).to_pylist()
        if r["strategy"] == "agent"
    }
    retail = rows["retail"]
    assert [a["tool"] for a in retail["actions"]] == ["list_products", "teleport", "get_product", "add_to_cart"]
    assert json.loads(retail["messages_json"])[0]["role"] == "system"
    assert len(rows["clinic"]["actions"]) == 5  # cut by the step limit
    steps = [
        s
        for p in layout.step_parts()
        for s in pq.read_table(p).to_pylist()
        if s["trajectory_id"] == retail["trajectory_id"]
    ]
    by_tool = {s["tool"]: s for s in steps}
    assert by_tool["teleport"]["outcome"] == "error"  # an unknown tool is a labeled error step
    assert by_tool["add_to_cart"]["outcome"] == "success" and by_tool["add_to_cart"]["delta_size"] >= 1
    assert verify_steps(layout).ok


def test_recorded_histories_replay_to_identical_labels(agent_run, sandbox):
    layout, result, _, _, _ = agent_run
    from pipeline.core.trajectory import Trajectory
    from pipeline.store.trajectories import iter_trajectories

    stored = {t.trajectory_id: t for t in iter_trajectories(layout) if t.strategy == "agent"}
    steps = {}
    for p in layout.step_parts():
        for s in pq.read_table(p).to_pylist():
            steps.setdefault(s["trajectory_id"], {})[s["step_index"]] = s
    for tid, traj in stored.items():
        row = next(r for r in pq.read_table(layout.trajectories).to_pylist() if r["trajectory_id"] == tid)
        actions, _ = actions_from_messages(json.loads(row["messages_json"]))
        replay = Trajectory(tid, traj.task_id, traj.env, tuple(actions))
        [(_, fresh)] = list(sandbox.run([replay]))
        for s in fresh["steps"]:
            old = steps[tid][s["step_index"]]
            for key in (
                "tool",
                "arguments_json",
                "raw_observation",
                "outcome",
                "delta_size",
                "state_before_hash",
                "state_after_hash",
            ):
                assert s[key] == old[key], (tid, s["step_index"], key)


def test_agent_policy_from_the_asset_config(tmp_path):
    from dagster import materialize

    from assets.collection import trajectories
    from assets.environments import environment_catalog
    from resources import (
        CompositionResource,
        DataStoreResource,
        EnvironmentSourcesResource,
        RunPolicyResource,
        SandboxResource,
    )

    with FakeOpenAI({}, script=ScriptedAgent()) as server:
        result = materialize(
            [environment_catalog, trajectories],
            resources={
                "store": DataStoreResource(data_root=str(tmp_path / "data")),
                "sources": EnvironmentSourcesResource(bfcl={"replay": False}, builtin={"scenarios_per_env": 1}),
                "sandbox": SandboxResource(workers=2),
                "composition": CompositionResource(),
                "run_policy": RunPolicyResource(),
            },
            run_config={
                "ops": {
                    "trajectories": {
                        "config": {
                            "enabled": False,
                            "agent": {"model": "scripted", "base_url": server.url, "step_limit": 4, "task_limit": 2},
                        }
                    }
                }
            },
        )
    assert result.success
    meta = [e for e in result.get_asset_materialization_events() if e.asset_key.to_user_string() == "trajectories"][0]
    text = meta.event_specific_data.materialization.metadata["agent"].value
    assert text.startswith("2 episodes with scripted") and "unknown_tool" in text


def test_histories_from_another_tool_replay_through_the_labeling_core(agent_run, sandbox, tmp_path):
    """The recorded episodes, rewritten in a foreign format (env_id + init_config + messages), replay
    to the same labels as the agent run — without the model."""
    layout, result, _, _, _ = agent_run
    history = tmp_path / "histories.jsonl"
    with history.open("w") as fh:
        for ep in result.agent_episodes:
            fh.write(
                json.dumps(
                    {
                        "task_id": ep["task_id"],
                        "env_id": ep["env"]["env_id"],
                        "init_config": ep["env"]["init_config"],
                        "messages": ep["messages"],
                    }
                )
                + "\n"
            )
        fh.write("{broken\n")
    replay_layout = DataLayout.at(tmp_path / "replay")
    cfg = sources_config(bfcl={"replay": False}, builtin={"scenarios_per_env": 1}, message_histories=[history])
    items, issues = env_items(cfg)
    build_catalog(replay_layout, items, issues)
    collected = collect_all(cfg, replay_layout, sandbox, None)
    assert collected.report.by_strategy == {"replay-messages": 3}
    reasons = " ".join(i.reason for i in collected.report.issues)
    assert "not a message-history record" in reasons and "not replayed" in reasons  # the bad JSON call is reported
    label(replay_layout, sandbox)

    def labels(lay):
        out = {}
        for p in lay.step_parts():
            for s in pq.read_table(p).to_pylist():
                out[(s["task_id"], s["step_index"])] = (
                    s["tool"],
                    s["arguments_json"],
                    s["raw_observation"],
                    s["outcome"],
                    s["delta_size"],
                    s["state_after_hash"],
                )
        return out

    agent_labels = {k: v for k, v in labels(layout).items()}
    assert labels(replay_layout) == agent_labels


def test_answers_without_a_tool_call_say_why():
    """An answer with no tool call is an event: a call the endpoint did not parse, a cut, or plain text."""
    import httpx
    import openai

    from pipeline.collect.agent import absent_call, endpoint_reason

    unparsed = absent_call("Action: get_book\nAction Input: {book_id: BK001}", "stop", 40)
    assert unparsed["kind"] == "unparsed_tool_call" and "Action: get_book" in unparsed["reason"]
    assert absent_call('{"name": "get_book", "arguments": 3}', "stop", 40)["kind"] == "unparsed_tool_call"
    cut = absent_call("You can use the following code", "length", 40)
    assert cut["kind"] == "no_tool_call" and "cut at max_tokens (40)" in cut["reason"]
    assert absent_call("Done.", "stop", 40)["reason"].startswith("answered in text")
    assert absent_call(None, "stop", 40)["reason"].startswith("an empty answer")
    request = httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")
    refused = openai.BadRequestError(
        "Error code: 400 - {'detail': 'Only supports u/a/u/a/u...'}",
        response=httpx.Response(400, request=request),
        body=None,
    )
    assert "parallel tool call" in endpoint_reason(refused)
