"""Serving environments to agent-RL trainers: live sandboxed sessions, the OpenEnv protocol over a real uvicorn
server (an exact-protocol websocket client), the exec/shadow modes, the gem.Env and TRL adapters."""

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
import uvicorn
from websockets.sync.client import connect

from pipeline.collect.run import collect_all
from pipeline.collect.sources import configured_files, disabled_sources, replay_trajectories
from pipeline.core.trajectory import Trajectory
from pipeline.envs import builtin, envscaler
from pipeline.envs.registry import sources_config
from pipeline.envs.sources.served import EPISODES
from pipeline.evaluate.simulators import make_simulator, simulator_spec
from pipeline.execution.child import Limits
from pipeline.labeling.steps import label
from pipeline.select.stratify import stratify
from pipeline.serve.adapters import GemEnv, ToolEnvironment, parse_action
from pipeline.serve.episode import Episode
from pipeline.serve.host import run_checks
from pipeline.serve.run import EpisodeLog
from pipeline.serve.server import build_app, server_config
from pipeline.serve.sessions import CapacityError, SessionPool, _Channel
from pipeline.serve.tasks import BY_REFERENCE, NO_CHECK, ServedTask, load_tasks
from pipeline.store import catalog, warehouse
from pipeline.store.layout import DataLayout
from resources import EnvironmentSourcesResource
from tests.support.envscaler_corpus import HOSTILE_CODE
from tests.support.leftovers import living
from tests.support.parallel import forge_environment, one_at_a_time
from tests.support.procs import descendants

ROOT = Path(__file__).resolve().parents[2]
RETAIL = "builtin-retail-s0-00000"  # customer C001; P001 in stock
BUY = [
    ("add_to_cart", {"customer_id": "C001", "product_id": "P001", "quantity": 1}),
    ("checkout", {"customer_id": "C001"}),
    ("view_cart", {"customer_id": "C001"}),
]


@pytest.fixture(scope="module")
def tasks():
    cfg = sources_config(builtin={"scenarios_per_env": 2}, bfcl={"categories": ()})
    return load_tasks(cfg)


@pytest.fixture(scope="module")
def pool():
    with SessionPool(max_sessions=80, limits=Limits(call_timeout_s=10)) as p:
        yield p


def _hostile(checks=()):
    item = envscaler.parse_env_item("hostile", {"env_class_name": "Hostile", "env_class_code": HOSTILE_CODE})
    assert not item.problems, item.problems
    return item.spec({})


def test_every_builtin_task_has_checks_that_run_on_its_initial_state(tasks):
    retail = [t for t in tasks if t.task_id.startswith("builtin-")]
    assert len(retail) == 20 and all(t.checks and t.note is None for t in retail)
    for sc in builtin.scenarios(2):
        checks = [c["check_func"] for c in sc["checklist_with_func"]]
        verdicts = run_checks(checks, sc["init_config"], sc["init_config"])
        assert all(isinstance(v, bool) for v in verdicts), (sc["task_id"], verdicts)  # every key the check reads exists


def test_a_check_that_raises_counts_as_failed():
    code = ["def check_func(final_state):\n    return final_state['x'] == 1", "def check_func(s):\n    raise KeyError"]
    two = "def check_func(init_state, final_state):\n    return final_state['x'] > init_state['x']"
    assert run_checks([*code, two], {"x": 0}, {"x": 1}) == [True, None, True]


def test_session_steps_carry_labels_and_the_reward_equals_the_checks(pool, tasks):
    task = next(t for t in tasks if t.task_id == RETAIL)
    session = pool.open(task.env, "served/test/0", 0, list(task.checks))
    steps = [session.call(name, args) for name, args in BUY]
    assert [s.labels["outcome"] for s in steps] == ["success"] * 3
    assert steps[0].labels["delta_size"] >= 1 and steps[1].labels["delta_size"] > steps[0].labels["delta_size"]
    assert steps[2].labels["delta_size"] == 0
    assert steps[0].checks == [False, False] and steps[1].checks == [True, True]
    assert session.state["customers"]["C001"]["orders"]  # the labeled real state
    session.close()
    assert pool.active == 0


def test_same_episode_and_calls_give_identical_observations_and_states(pool, tasks):
    task = next(t for t in tasks if t.task_id == RETAIL)
    runs = []
    for _ in range(2):
        session = pool.open(task.env, "served/det/7", 7, list(task.checks))
        runs.append([(s.observation, s.labels["state_after_hash"]) for s in (session.call(*c) for c in BUY)])
        session.close()
    assert runs[0] == runs[1]


def test_a_closed_session_child_serves_the_next_session_of_our_code_as_if_fresh(tasks):
    """A session closed cleanly on the builtin pack leaves its child for the next session of the same environment:
    that session starts from the initial state, not the one the first left, and plays as a fresh child does (the
    same observations, states and checks); corpus code and a session whose call was lost never lend their child."""
    with SessionPool(max_sessions=8, limits=Limits(call_timeout_s=2)) as own:
        task = next(t for t in tasks if t.task_id == RETAIL)
        played = []
        for _ in range(3):
            session = own.open(task.env, "served/reuse/3", 3, list(task.checks))
            first = session.state
            steps = [session.call(name, args) for name, args in BUY]
            played.append((first, [(s.observation, s.labels["state_after_hash"], s.checks) for s in steps]))
            assert session.state != first  # it bought something
            session.close()
        assert played[0] == played[1] == played[2] and session.uses == 3 and session.host_sid != session.sid
        where = own.open(task.env, "served/reuse/4", 4)
        assert where.uses == 4 and where.call("view_cart", {"customer_id": "C001"}).labels["outcome"] == "success"
        where.close()
        hostile = [own.open(_hostile(), f"served/hostile/{i}", 0) for i in range(2)]
        assert hostile[0].reuse_key is None and not hostile[0].call("crash", {}).alive
        hostile[1].close()
        again = own.open(_hostile(), "served/hostile/2", 0)
        assert again.uses == 1 and again.host_sid == again.sid  # a child of its own
        again.close()


def test_a_child_serves_at_most_the_pools_reuses(tasks):
    """``reuses`` bounds the sessions one child serves: the third session after two on one child gets a fresh one."""
    task = next(t for t in tasks if t.task_id == RETAIL)
    with SessionPool(max_sessions=4, limits=Limits(call_timeout_s=2), reuses=2) as own:
        sessions = []
        for k in range(3):
            sessions.append(own.open(task.env, f"served/reuses/{k}", k))
            sessions[-1].close()
        assert [s.uses for s in sessions] == [1, 2, 1]
        assert sessions[1].host_sid == sessions[0].sid and sessions[2].host_sid == sessions[2].sid


def test_a_hang_or_crash_ends_only_its_own_session():
    spec = _hostile()
    pool = SessionPool(max_sessions=4, limits=Limits(call_timeout_s=2))
    hang, crash, calm = (pool.open(spec, f"served/hostile/{i}", 0) for i in range(3))
    assert calm.call("bump", {}).labels["outcome"] == "success"
    out = {}
    waiter = threading.Thread(target=lambda: out.setdefault("hang", hang.call("hang", {})))
    waiter.start()
    died = crash.call("crash", {})
    assert calm.call("bump", {}).observation == "{'success': True, 'data': 2}"  # its own count, answered meanwhile
    waiter.join(30)
    assert not died.alive and died.labels["outcome"] == "error" and crash.closed
    assert not out["hang"].alive and out["hang"].labels["error_type"] == "Timeout"
    assert calm.closed is None and calm.call("bump", {}).observation == "{'success': True, 'data': 3}"
    pool.close()
    assert pool.active == 0


def test_a_child_that_reads_nothing_or_sends_garbage_never_blocks_the_event_loop():
    """A session's own pipes (``_Channel``, real pipes): a request bigger than the pipe holds, to a child that reads
    nothing, is waited for on the loop and ends as a Timeout at the call's limit while other coroutines run; a
    child's invalid frame is UntrustedData and the end of its pipe WorkerCrash, each at once."""

    async def scenario() -> tuple[dict, int, float, dict, tuple[dict, float]]:
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        channel = _Channel(from_child_r, to_child_w, 1 << 20)
        ticks = [0]

        async def tick() -> None:
            while True:
                ticks[0] += 1
                await asyncio.sleep(0.01)

        ticker = asyncio.create_task(tick())
        t0 = time.monotonic()
        sent = await channel.send_async(b"x" * (4 << 20), 0.5)  # nobody reads: the pipe fills
        waited = time.monotonic() - t0
        ticker.cancel()
        os.write(from_child_w, (9).to_bytes(4, "big") + b"not json!")
        broken = await channel.receive_async(5.0)
        os.close(to_child_r)
        os.close(from_child_w)
        channel.close()
        gone_r, gone_w = os.pipe()
        os.close(gone_w)  # the child died: its end of the pipe is closed
        gone = _Channel(gone_r, os.open(os.devnull, os.O_WRONLY), 1 << 20)
        t0 = time.monotonic()
        died = await gone.receive_async(30.0)
        gone.close()
        return sent, ticks[0], waited, broken, (died, time.monotonic() - t0)

    sent, ticks, waited, broken, (died, seconds) = asyncio.run(scenario())
    assert sent["error_type"] == "Timeout" and "0.5s wall-clock limit" in sent["error"]
    assert 0.4 < waited < 3 and ticks >= 20  # the loop ran other work all the while
    assert broken["error_type"] == "UntrustedData" and "invalid frame" in broken["error"]
    assert died["error_type"] == "WorkerCrash" and "died" in died["error"] and seconds < 5


def test_capacity_is_refused_at_once_and_idle_sessions_are_reaped(tasks):
    task = tasks[0]
    with SessionPool(max_sessions=2, idle_timeout_s=0.5) as small:
        a = small.open(task.env, "served/cap/0")
        small.open(task.env, "served/cap/1")
        t0 = time.monotonic()
        with pytest.raises(CapacityError, match="capacity reached: 2 of 2"):
            small.open(task.env, "served/cap/2")
        assert time.monotonic() - t0 < 1.0
        deadline = time.monotonic() + 10
        while small.active and time.monotonic() < deadline:
            time.sleep(0.2)
        assert small.active == 0 and small.reaped == 2 and a.closed == "idle"
        small.open(task.env, "served/cap/3").close()  # a freed slot serves again


# -- the OpenEnv protocol over a real server ------------------------------------------------------------


@contextlib.contextmanager
def _serving(pool, tasks, **episode):
    """The OpenEnv server over ``pool`` on a free port, with the settings ``./forge serve-env`` uses."""
    app = build_app(lambda: Episode(pool, tasks, **episode), [t.task_id for t in tasks])
    srv = uvicorn.Server(server_config(app, port=0, log_level="error"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    while not srv.started:
        time.sleep(0.05)
    try:
        yield f"ws://127.0.0.1:{srv.servers[0].sockets[0].getsockname()[1]}"
    finally:
        srv.should_exit = True
        thread.join(10)


@pytest.fixture(scope="module")
def server(pool, tasks):
    episodes = []
    with _serving(pool, tasks, record=episodes.append) as url:
        yield url, episodes


def _ask(ws, message):
    ws.send(json.dumps(message))
    return json.loads(ws.recv())


def _episode(url, seed=0, task_id=RETAIL):
    # a long opening handshake is load, not a capacity error (64 clients connect at once on a 2-CPU machine)
    with connect(url + "/ws", open_timeout=120) as ws:
        reset = _ask(ws, {"type": "reset", "data": {"seed": seed, "task_id": task_id}})
        assert reset["type"] == "observation", reset
        tools = _ask(ws, {"type": "step", "data": {"type": "list_tools"}})
        steps = [
            _ask(ws, {"type": "step", "data": {"type": "call_tool", "tool_name": n, "arguments": a}}) for n, a in BUY
        ]
        ws.send(json.dumps({"type": "close"}))
    return reset, tools, steps


def test_openenv_session_reset_list_tools_call_tool_close(server, tasks):
    url, episodes = server
    reset, tools, steps = _episode(url)
    assert reset["type"] == "observation" and reset["data"]["done"] is False and reset["data"]["reward"] is None
    names = [t["name"] for t in tools["data"]["observation"]["tools"]]
    task = next(t for t in tasks if t.task_id == RETAIL)
    assert names == [t["function"]["name"] for t in task.tools] and "checkout" in names
    assert all(set(t) == {"name", "description", "input_schema"} for t in tools["data"]["observation"]["tools"])
    data = [s["data"] for s in steps]
    assert [d["reward"] for d in data] == [0.0, 1.0, 1.0]  # the mean of the task's two checks on the real state
    meta = data[1]["observation"]["metadata"]
    assert meta["checks"] == [True, True] and meta["outcome"] == "success" and meta["delta_size"] > 0
    assert data[1]["observation"]["tool_name"] == "checkout" and "order_id" in data[1]["observation"]["result"]
    deadline = time.monotonic() + 5
    while not any(e["served_task_id"] == RETAIL for e in episodes) and time.monotonic() < deadline:
        time.sleep(0.05)
    recorded = next(e for e in episodes if e["served_task_id"] == RETAIL)
    assert recorded["reward"] == 1.0 and len(recorded["steps"]) == 3 and recorded["mode"] == "exec"


def test_64_parallel_sessions_raise_no_capacity_error(server):
    url, _ = server
    results, errors = [], []

    def one(seed):
        try:
            results.append(_episode(url, seed))
        except Exception as exc:
            errors.append(repr(exc))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(64)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors and len(results) == 64
    replies = [m for _, tools, steps in results for m in (tools, *steps)]
    assert all(m["type"] == "observation" for m in replies)
    bad = [s[1]["data"] for _, _, s in results if s[1]["data"]["reward"] != 1.0]
    assert not bad, bad[:2]


def test_bad_input_gets_an_error_and_the_server_keeps_serving(server):
    url, _ = server
    with connect(url + "/ws") as ws:
        ws.send("{not json")
        assert json.loads(ws.recv())["data"]["code"] == "INVALID_JSON"
        assert _ask(ws, {"type": "dance"})["data"]["code"] == "UNKNOWN_TYPE"
        step = {"type": "step", "data": {"type": "call_tool", "tool_name": "checkout", "arguments": {}}}
        assert _ask(ws, step)["data"]["code"] == "EXECUTION_ERROR"  # no reset yet
        _ask(ws, {"type": "reset", "data": {"task_id": RETAIL}})
        unknown = _ask(ws, {"type": "step", "data": {"type": "call_tool", "tool_name": "rm_rf", "arguments": {}}})
        assert unknown["data"]["observation"]["error"]["error_type"] == "tool_not_found"
        wrong = _ask(
            ws, {"type": "step", "data": {"type": "call_tool", "tool_name": "checkout", "arguments": {"x": 1}}}
        )
        assert wrong["type"] == "observation" and wrong["data"]["observation"]["metadata"]["outcome"] == "error"
        assert _ask(ws, {"type": "state"})["data"]["step_count"] == 1
    with connect(url + "/ws") as ws:
        ws.send("x" * ((1 << 20) + 10))
        with pytest.raises(Exception):  # noqa: B017 - the server closes the socket (1009) or refuses the frame
            ws.recv()
    _, _, steps = _episode(url)
    assert steps[1]["data"]["reward"] == 1.0


def test_a_served_hang_or_crash_ends_only_its_own_episode_and_the_others_are_answered_meanwhile():
    """Over the WebSocket server (a call awaited on its event loop): a call that hangs ends its episode at the
    call's limit, one that kills its process ends its own, and another session's calls answer in the meantime."""
    tools = tuple(
        {"type": "function", "function": {"name": n, "description": n, "parameters": {"type": "object"}}}
        for n in ("bump", "hang", "crash")
    )
    task = ServedTask("hostile-0", _hostile(), "Bump it.", tools)
    with SessionPool(max_sessions=4, limits=Limits(call_timeout_s=2)) as own, _serving(own, [task]) as url:
        with connect(url + "/ws") as hang, connect(url + "/ws") as crash, connect(url + "/ws") as calm:
            for ws in (hang, crash, calm):
                assert _ask(ws, {"type": "reset", "data": {"task_id": "hostile-0"}})["type"] == "observation"
            t0 = time.monotonic()
            hang.send(json.dumps({"type": "step", "data": {"type": "call_tool", "tool_name": "hang"}}))
            died = _ask(crash, {"type": "step", "data": {"type": "call_tool", "tool_name": "crash"}})["data"]
            first = _ask(calm, {"type": "step", "data": {"type": "call_tool", "tool_name": "bump"}})["data"]
            assert time.monotonic() - t0 < 1.5  # answered while the hanging call runs
            hung = json.loads(hang.recv(timeout=30))["data"]
            second = _ask(calm, {"type": "step", "data": {"type": "call_tool", "tool_name": "bump"}})["data"]
    assert died["done"] and died["observation"]["metadata"]["outcome"] == "error"
    assert hung["done"] and hung["observation"]["metadata"]["error_type"] == "Timeout"
    assert "2s wall-clock limit" in hung["observation"]["metadata"]["error"]
    assert [first["observation"]["result"], second["observation"]["result"]] == [
        "{'success': True, 'data': 1}",
        "{'success': True, 'data': 2}",
    ]
    assert not first["done"] and not second["done"] and own.active == 0


def test_stateless_http_reset_and_step_each_play_a_fresh_episode(server):
    """``POST /reset`` and ``POST /step`` (OpenEnv's stateless routes): each request a fresh episode, reset by its
    body, then its action; a call that is no action is a 422 naming the shape."""
    base = server[0].replace("ws://", "http://")

    def post(route, body):
        request = urllib.request.Request(base + route, json.dumps(body).encode(), {"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=60) as reply:
                return reply.status, json.loads(reply.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    status, reset = post("/reset", {"task_id": RETAIL})
    assert status == 200 and reset["done"] is False and "checkout" in [t["name"] for t in reset["observation"]["tools"]]
    name, args = BUY[0]
    action = {"type": "call_tool", "tool_name": name, "arguments": args}
    status, step = post("/step", {"task_id": RETAIL, "action": action})
    assert status == 200 and step["reward"] == 0.0 and step["observation"]["metadata"]["outcome"] == "success"
    assert step["observation"]["metadata"]["step_index"] == 0  # a fresh episode: its first call
    status, refused = post("/step", {"task_id": RETAIL, "action": "checkout"})
    assert status == 422 and "action object" in refused["detail"]


# -- modes -----------------------------------------------------------------------------------------------


def _shadow(pool, tasks, kind):
    episode = Episode(pool, tasks, "shadow", make_simulator(simulator_spec(name=kind, kind=kind)))
    episode.reset(task_id=RETAIL)
    rows = [episode.call_tool(n, a) for n, a in BUY]
    episode.close()
    return [r["observation"]["metadata"] for r in rows], [r["reward"] for r in rows]


def test_shadow_with_oracle_has_no_drift_and_full_matches(pool, tasks):
    meta, rewards = _shadow(pool, tasks, "oracle")
    assert [(m["fm"], m["cm"], m["drift"]) for m in meta] == [(True, True, 0)] * 3
    assert rewards == [0.0, 1.0, 1.0]


def test_shadow_with_no_change_drifts_where_the_real_state_changes(pool, tasks):
    meta, rewards = _shadow(pool, tasks, "no_change")
    drift = [m["drift"] for m in meta]
    assert drift[0] == meta[0]["delta_size"] > 0 and drift[1] > drift[0] and drift[2] == drift[1]
    assert [m["cm"] for m in meta] == [False, False, True]  # Δ = 0 on the read: "no change" is right there
    assert rewards == [0.0, 1.0, 1.0]  # the reward is the real state's, whatever the simulator says


def test_a_task_without_checks_is_served_with_a_null_reward_and_a_note(pool, tasks):
    bare = ServedTask("bare", tasks[0].env, "t", tasks[0].tools, (), NO_CHECK)
    episode = Episode(pool, [bare])
    assert episode.reset()["observation"]["metadata"]["reward_note"] == NO_CHECK
    answer = episode.call_tool("list_products", {})
    assert answer["reward"] is None and answer["observation"]["metadata"]["reward_note"] == NO_CHECK
    episode.close()


# -- in-process adapters ---------------------------------------------------------------------------------


def test_parse_action_reads_tagged_json_and_call_strings():
    assert parse_action('<tool_call>{"name": "a", "arguments": {"x": 1}}</tool_call>') == ("a", {"x": 1})
    assert parse_action('b(y="z")') == ("b", {"y": "z"})
    assert parse_action({"tool_name": "c", "arguments": '{"k": 2}'}) == ("c", {"k": 2})


def test_gem_env_loop(pool, tasks):
    env = GemEnv(Episode(pool, tasks))
    obs, info = env.reset(seed=0, task_id=RETAIL)
    assert "C001" in obs and {t["function"]["name"] for t in info["tools"]} >= {"checkout"}
    total = 0.0
    for name, args in BUY:
        obs, reward, terminated, truncated, info = env.step(
            f"<tool_call>{json.dumps({'name': name, 'arguments': args})}</tool_call>"
        )
        total = reward
        assert not terminated and not truncated and info["outcome"] == "success"
    bad = env.step("I am done")
    assert bad[0].startswith("Error:") and bad[1] == total == 1.0
    env.close()


def test_a_reply_that_is_no_call_is_rewarded_by_the_state_as_it_is(pool, tasks):
    """Before any valid call the reward is the checks on the initial state (computed in the sandbox at reset): 1.0
    where they already hold (airline: PX005's booking is confirmed), 0.0 where they do not (retail: no order yet) —
    never a made-up 0 for a state that passes."""
    env = GemEnv(Episode(pool, tasks))
    for task_id, expected in (("builtin-airline-s0-00000", 1.0), (RETAIL, 0.0)):
        env.reset(seed=0, task_id=task_id)
        verdicts = run_checks(list(env.episode.task.checks), env.episode.session.state, env.episode.session.state)
        assert (sum(map(bool, verdicts)) / len(verdicts)) == expected
        for reply in ("I would book a flight", '<tool_call>{"name": "no_such_tool", "arguments": {}}</tool_call>'):
            obs, reward, terminated, truncated, _ = env.step(reply)
            assert obs.startswith("Error:") and reward == expected and not terminated and not truncated
    env.close()


def test_trl_environment_class_exposes_the_tools_as_methods(pool, tasks):
    env = ToolEnvironment(Episode(pool, tasks))
    assert "C001" in env.reset(task_id=RETAIL, seed=0)
    env.add_to_cart(customer_id="C001", product_id="P001", quantity=1)
    assert "order_id" in env.checkout(customer_id="C001") and env.get_reward() == 1.0
    with pytest.raises(ValueError, match="unknown tool"):
        env._bound("nope", "")()
    env.close()


def test_a_bfcl_task_is_rewarded_by_its_ground_truth_replay(pool):
    cfg = sources_config(builtin={"enabled": False}, bfcl={"categories": ("base",)})
    bfcl_tasks = [t for t in load_tasks(cfg) if t.reference][:2]
    assert bfcl_tasks and all(t.note == BY_REFERENCE and not t.checks for t in bfcl_tasks)
    episode = Episode(pool, bfcl_tasks)
    partial = []
    for task in bfcl_tasks:
        episode.reset(task_id=task.task_id)
        answers = [episode.call_tool(tool, arguments) for tool, arguments in task.reference]
        assert answers[-1]["reward"] == 1.0, task.task_id  # the agent that does what the ground truth does
        final = answers[-1]["observation"]["metadata"]["state_after_hash"]
        for answer in answers:  # on the way: 1.0 exactly where the state already is the final one
            reached = answer["observation"]["metadata"]["state_after_hash"] == final
            assert answer["reward"] == (1.0 if reached else 0.0)
        partial.append(answers[0]["reward"])
    assert 0.0 in partial  # a first call alone does not finish these tasks
    episode.close()


@pytest.fixture(scope="module")
def openenv_python(tmp_path_factory):
    """.venv-openenv (``./forge openenv-env``): OpenEnv's own client beside .venv's packages, created once."""
    return forge_environment(tmp_path_factory, "openenv-env", ".venv-openenv", timeout=900)


@pytest.mark.slow
def test_forge_serve_env_serves_openenv_own_client_and_stops_on_ctrl_c(openenv_python, tmp_path):
    """``./forge serve-env --port 0`` on the default data prints its URL; OpenEnv's own MCPToolClient (openenv-core
    0.3.0, in its own environment: ./forge openenv-env) runs reset -> list_tools -> call_tool x3 -> close, 64 of them
    side by side, the reward the scenario's checks; Ctrl-C (SIGINT to its process group) stops it with every session
    and sandbox process gone and the episodes logged."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENVSIM_")}
    env["ENVSIM_DATA_ROOT"] = str(tmp_path / "data")
    proc = subprocess.Popen(
        ["./forge", "serve-env", "--port", "0"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        process_group=0,
    )
    try:
        first, _, how_to_stop = (proc.stdout.readline() for _ in range(3))  # type: ignore[union-attr]
        assert first.startswith("serving ") and " with executable checks) at http://127.0.0.1:" in first, first
        url = first.split(" at ", 1)[1].split(" ", 1)[0]
        command = [openenv_python, "-m", "tests.support.openenv_client", url, RETAIL, "64", json.dumps(BUY)]
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
        started = descendants(proc.pid)
        assert started, "the server started no sandbox process"
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    results = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(results) == 64 and "checkout" in results[0]["tools"]
    assert all([s["reward"] for s in r["steps"]] == [0.0, 1.0, 1.0] for r in results)  # no capacity error either
    first_steps = results[0]["steps"]
    assert first_steps[1]["checks"] == [True, True] and first_steps[1]["error"] is None
    assert {"outcome", "delta_size"} <= set(first_steps[0]["metadata"])  # the step's executor labels
    assert proc.returncode == 0, err[-3000:]
    assert how_to_stop.strip() == "stop it with Ctrl-C (or SIGTERM)", how_to_stop
    assert out.rstrip().endswith("stopped: every session and sandbox process ended"), out
    assert not living(started), "a process of the server outlived it"
    logged = (tmp_path / "data" / "served" / "episodes.jsonl").read_text().splitlines()
    assert len(logged) == 64 and all(json.loads(line)["reward"] == 1.0 for line in logged)


def test_served_episodes_become_served_trajectories_labeled_steps_and_views(pool, tasks, sandbox, tmp_path):
    """Two builtin episodes served in-process (exec, shadow with no_change) are logged whole; the ``served`` source
    turns them into trajectories of category ``served``, which collection, labeling and stratification take like
    any other; the warehouse views give their reward by task, environment and mode and shadow drift by step."""
    layout = DataLayout.at(tmp_path / "data")
    log = EpisodeLog(layout.root / EPISODES)
    no_change = make_simulator(simulator_spec(name="no_change", kind="no_change"))
    for seed, mode in ((0, "exec"), (1, "shadow")):
        episode = Episode(pool, tasks, mode, no_change if mode == "shadow" else None, record=log)
        episode.reset(seed=seed, task_id=RETAIL)
        for name, args in BUY:
            episode.call_tool(name, args)
        episode.close()
    rows = [json.loads(line) for line in log.path.read_text().splitlines()]
    assert len(rows) == 2 and [r["reward"] for r in rows] == [1.0, 1.0] and rows[0]["task_id"] != rows[1]["task_id"]

    cfg = EnvironmentSourcesResource(builtin={"enabled": False}, bfcl={"categories": []}).config(layout)
    assert disabled_sources(cfg).get("served") is None
    served = [t for t in replay_trajectories(cfg, only="served") if isinstance(t, Trajectory)]
    assert len(served) == 2 and {t.category for t in served} == {"served"}
    assert [(a.name, a.arguments) for a in served[0].actions] == [(n, a) for n, a in BUY]
    assert served[0].env == next(t for t in tasks if t.task_id == RETAIL).env

    collect_all(cfg, layout, sandbox)
    trajectories = pq.read_table(layout.trajectories).to_pylist()
    assert sorted((t["category"], t["strategy"], t["num_actions"]) for t in trajectories) == [
        ("served", "served-exec", 3),
        ("served", "served-shadow", 3),
    ]
    label(layout, sandbox)
    stratify(layout)
    steps = [r for part in layout.step_parts() for r in pq.read_table(part).to_pylist()]
    assert len(steps) == 6 and [s["outcome"] for s in steps] == ["success"] * 6
    # the labels of the replay are the served session's: the same Δ sizes as the episode recorded
    recorded = sorted((r["episode_id"], s["step_index"], s["delta_size"]) for r in rows for s in r["steps"])
    by_traj = {t.trajectory_id: t.meta["episode_id"] for t in served}
    assert sorted((by_traj[s["trajectory_id"]], s["step_index"], s["delta_size"]) for s in steps) == recorded
    assert pq.read_table(layout.strata).num_rows == 6

    con = duckdb.connect(str(layout.root / "envsim.duckdb"))
    try:
        warehouse.sync(con, layout)
        assert con.execute(
            "SELECT task_id, env_id, mode, episodes, mean_reward FROM served_reward ORDER BY mode"
        ).fetchall() == [
            (RETAIL, served[0].env.env_id, "exec", 1, 1.0),
            (RETAIL, served[0].env.env_id, "shadow", 1, 1.0),
        ]
        drift = con.execute("SELECT step_index, mean_drift FROM served_drift_by_step ORDER BY step_index").fetchall()
        assert [d for _, d in drift] == [r["drift"] for r in rows[1]["steps"]] and drift[1][1] > drift[0][1] > 0
        assert not list(catalog.undocumented(con))
    finally:
        con.close()


def test_without_served_episodes_the_source_is_a_no_op(tmp_path):
    layout = DataLayout.at(tmp_path)
    cfg = EnvironmentSourcesResource().config(layout)
    assert "served" not in disabled_sources(cfg) and not list(replay_trajectories(cfg, only="served"))
    assert not [key for key, _ in configured_files(cfg) if "served" in key]
    con = duckdb.connect()
    try:
        assert not {"served_episodes", "served_reward"} & set(warehouse.sync(con, layout))
    finally:
        con.close()


def test_a_served_session_keeps_every_rule_of_the_labeling_sandbox(pool):
    """Network, processes and writes outside its directory are refused inside a session as in labeling, and the
    session goes on (each refusal is a step of that call, not a lost session): a refused syscall (socket, a new
    process) is ``sandbox_refused`` naming it, a write outside is the kernel's ``EACCES``, an ``error``."""
    session = pool.open(_hostile(), "served/hostile/rules", 0)
    for tool, outcome, syscall in (
        ("phone_home", "sandbox_refused", "socket"),
        ("fork_bomb", "sandbox_refused", None),
        ("write_outside", "error", None),
    ):
        step = session.call(tool, {})
        assert step.labels["outcome"] == outcome, (tool, step.observation)
        if syscall is not None:
            assert f"syscall {syscall!r}" in step.labels["error_message"], step.labels
    session.call("shell_out", {})  # os.system cannot start a process: its file never appears
    assert not os.path.exists("/tmp/envsim-owned") and not os.path.exists("/tmp/envsim-escape.txt")
    assert session.call("write_inside", {}).labels["outcome"] == "success"
    assert session.closed is None
    session.close()


def test_a_session_outlives_the_thread_that_opened_it(tasks):
    """A server opens sessions from worker threads that come and go; the host must not end with its first one."""
    env = next(t for t in tasks if t.task_id == RETAIL).env
    with SessionPool(max_sessions=2) as own:
        box = {}
        opener = threading.Thread(target=lambda: box.setdefault("s", own.open(env, "served/thread/0")))
        opener.start()
        opener.join()
        time.sleep(1.0)
        step = box["s"].call("list_products", {})
        assert step.alive and step.labels["outcome"] == "success"
