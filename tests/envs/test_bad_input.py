"""Bad input is reported with the task id and reason; everything else is still labeled."""

import pyarrow.parquet as pq
import pytest

from pipeline.collect.collector import collect
from pipeline.envs.bfcl_replay import ground_truth_trajectories
from pipeline.envs.bfcl_tasks import iter_tasks
from pipeline.execution.child import Limits
from pipeline.execution.sandbox import Sandbox
from pipeline.labeling.steps import label
from pipeline.store.layout import DataLayout
from pipeline.store.reconstruct import verify_steps
from tests.support.bad_tasks import bad_task_file


@pytest.fixture(scope="module")
def bad_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bad")
    layout = DataLayout.at(tmp / "data")
    with Sandbox(workers=2, limits=Limits(call_timeout_s=2)) as box:
        collected = collect(ground_truth_trajectories(iter_tasks([bad_task_file(tmp)])), layout, box)
        labeled = label(layout, box)
    return layout, collected, labeled


def test_each_bad_task_is_reported_with_its_reason(bad_run):
    layout, collected, _ = bad_run
    issues = {i.task_id: i for i in collected.issues}
    assert set(issues) == {"custom_tasks.json:2", "unknown_tool", "syntax_error", "load_raises"}
    assert "not JSON" in issues["custom_tasks.json:2"].reason
    assert "unknown tool 'rm_rf'" in issues["unknown_tool"].reason
    assert "syntax error" in issues["syntax_error"].reason
    assert issues["load_raises"].stage == "reset" and "ValueError" in issues["load_raises"].reason
    stored = pq.read_table(layout.collection_issues).to_pylist()
    assert {r["task_id"] for r in stored} == set(issues)


def test_good_tasks_are_still_labeled(bad_run):
    layout, collected, labeled = bad_run
    assert collected.trajectories == 3
    steps = pq.read_table(layout.step_parts()[0]).to_pylist()
    by_task = {}
    for s in steps:
        by_task.setdefault(s["task_id"], []).append(s)
    assert [s["delta_size"] > 0 for s in by_task["good_tweets"]] == [True, True]
    assert [s["outcome"] for s in by_task["good_math"]] == ["success", "success"]


def test_a_hanging_call_is_an_error_step_and_the_trajectory_goes_on(bad_run):
    layout, _, labeled = bad_run
    steps = sorted(
        (s for s in pq.read_table(layout.step_parts()[0]).to_pylist() if s["task_id"] == "hangs"),
        key=lambda s: s["step_index"],
    )
    assert [s["tool"] for s in steps] == ["post_tweet", "square_root", "post_tweet"]
    hung = steps[1]
    assert hung["outcome"] == "error" and hung["error_type"] == "Timeout"
    assert hung["raw_observation"].startswith("Error:") and "2s" in hung["raw_observation"]
    assert hung["delta_size"] == 0 and hung["state_before_hash"] == hung["state_after_hash"]
    assert steps[2]["outcome"] == "success" and steps[2]["state_before_hash"] == steps[0]["state_after_hash"]
    assert any(i.task_id == "hangs" and "square_root" in i.reason and "exceeded" in i.reason for i in labeled.issues)
    assert verify_steps(layout).ok


# -- malformed corpus, task and history files: one issue per record, the rest is read ----------------

import json

from pipeline.collect.run import collect_all
from pipeline.collect.sources import SourceConfig, env_items, exploration_scenarios, history_trajectories
from pipeline.core.issues import TaskIssue
from pipeline.envs.catalog import build_catalog
from pipeline.envs.config import EnvScalerCorpus
from pipeline.envs.registry import sources_config
from tests.conftest import make_task_file
from tests.support.envscaler_corpus import ITEMS

SHOP = ITEMS["counter_shop"]
SELL_COUNT = [
    {"role": "user", "content": "sell"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "sell", "arguments": '{"item": "apple", "qty": 1}'}},
            {"id": "c2", "type": "function", "function": {"name": "count", "arguments": "{}"}},
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    {"role": "tool", "tool_call_id": "c2", "content": "2"},
]


def _json_bytes(obj) -> bytes:
    return json.dumps(obj, indent=1).encode()


def _with_bad_byte(data: bytes, marker: str) -> bytes:
    """``data`` with the (ASCII) ``marker`` replaced by a byte that is not UTF-8."""
    assert marker.encode() in data
    return data.replace(marker.encode(), marker.encode()[:-1] + b"\xff", 1)


def _issues_by_id(issues):
    out = {}
    for issue in issues:
        out.setdefault(issue.task_id, []).append(issue)
    return out


@pytest.fixture()
def bad_corpus(tmp_path):
    """One EnvScaler corpus (dict format) with a bad byte, wrong types and a repeated env id; a second
    corpus (list format) repeating an id of the first; scenarios with a bad byte and a repeated task id."""
    items = {
        "good": SHOP,
        "bad_byte": {**SHOP, "environment_introduction": "caf-MARK"},
        "tools_int": {**SHOP, "tools": 5},
        "params_str": {
            **SHOP,
            "tools": [{"type": "function", "function": {"name": "sell", "parameters": "x"}}, SHOP["tools"][1]],
        },
        "params_only_bad": {**SHOP, "tools": [{"type": "function", "function": {"name": "count", "parameters": "x"}}]},
        "huge_bad": {**SHOP, "tools": "[" + "x" * 200_000},
    }
    text = _with_bad_byte(_json_bytes(items), "caf-MARK")
    # a JSON object repeating a key: json.loads would keep the last silently
    text = (
        text.rstrip()[:-1]
        + b',\n "good": {"env_class_name": "Other", "env_class_code": "class Other:\\n  def f(self):\\n    return '
        b'1\\n"}\n}'
    )
    env_file = tmp_path / "envs.json"
    env_file.write_bytes(text)
    second = tmp_path / "more_envs.json"
    second.write_text(json.dumps([{"env_id": "params_str", **SHOP}, {"env_id": "second_only", **SHOP}]))
    scenarios = [
        {"task_id": "t1", "env_id": "good", "init_config": {"stock": {"apple": 2}, "till": 0}, "task": "Sell."},
        {"task_id": "t-bad", "env_id": "good", "init_config": {"stock": {"apple": 2}}, "task": "naMARK"},
        {"task_id": "t1", "env_id": "good", "init_config": {"stock": {"pear": 9}}, "task": "The same id again."},
        {"task_id": "t2", "env_id": "second_only", "init_config": {}, "task": "Count."},
    ]
    scen_file = tmp_path / "scenarios.json"
    scen_file.write_bytes(_with_bad_byte(_json_bytes(scenarios), "naMARK"))
    return sources_config(
        bfcl={"categories": [], "replay": False},
        builtin={"enabled": False},
        envscaler=[EnvScalerCorpus(env_file, scen_file), EnvScalerCorpus(second)],
    )


def test_env_items_bad_bytes_types_and_duplicates_are_issues_naming_file_and_record(bad_corpus):
    items, issues = env_items(bad_corpus)
    by_id = _issues_by_id(issues)
    assert sorted(i.env_id for i in items) == ["good", "params_str", "second_only"]
    assert next(i for i in items if i.env_id == "good").class_name == "CounterShop"  # the first "good" is kept

    (bad,) = by_id["bad_byte"]
    assert bad.origin == "envs.json:bad_byte" and "not valid UTF-8: byte 0xff" in bad.reason
    assert "'environment_introduction'" in bad.reason and "caf-MAR" in bad.reason
    (tools_int,) = by_id["tools_int"]
    assert tools_int.origin == "envs.json:tools_int" and "'tools' is a int" in tools_int.reason
    (params,) = by_id["params_str"][:1]
    assert params.stage == "tools" and "tool 'sell': 'parameters' is a str" in params.reason
    assert next(i for i in items if i.env_id == "params_str").tool_names == ["count"]  # the good tool stays
    (only_bad,) = by_id["params_only_bad"]
    assert "no usable tools" in only_bad.reason and "'parameters' is a str" in only_bad.reason
    (huge,) = by_id["huge_bad"]
    assert "'tools' is a string but not JSON" in huge.reason and len(huge.reason) < 400

    (dup_in_file,) = by_id["good"]
    assert dup_in_file.origin == "envs.json:good (occurrence 2)"
    assert (
        "duplicate env id 'envscaler/good'" in dup_in_file.reason
        and "the first, at envs.json:good, is kept" in dup_in_file.reason
    )
    dup_across = [i for i in by_id["params_str"] if "duplicate" in i.reason]
    assert [i.origin for i in dup_across] == ["more_envs.json[0]:params_str"]
    assert "the first, at envs.json:params_str, is kept" in dup_across[0].reason


def test_scenario_bad_byte_and_repeated_task_id_are_issues(bad_corpus):
    items, _ = env_items(bad_corpus)
    scenarios, issues = exploration_scenarios(bad_corpus, items)
    assert sorted((s.task_id, s.env.env_id) for s in scenarios if s.category != "explore-defaults") == [
        ("t1", "envscaler/good"),
        ("t2", "envscaler/second_only"),
    ]
    assert next(s for s in scenarios if s.task_id == "t1").env.init_config == {"stock": {"apple": 2}, "till": 0}
    by_id = _issues_by_id(issues)
    (bad,) = by_id["t-bad"]
    assert bad.origin == "scenarios.json[1]" and "not valid UTF-8: byte 0xff in field 'task'" in bad.reason
    (dup,) = by_id["t1"]
    assert dup.origin == "scenarios.json[2]" and "scenarios.json[0]" in dup.reason and "duplicate task id" in dup.reason


def test_bfcl_task_files_bad_bytes_types_and_duplicate_ids(tmp_path):
    from tests.conftest import TWITTER_CFG

    def task(task_id, **extra):
        return {
            "id": task_id,
            "question": [[{"role": "user", "content": "post"}]],
            "initial_config": TWITTER_CFG,
            "involved_classes": ["TwitterAPI"],
            "excluded_function": [],
            **extra,
        }

    truth = [["post_tweet(content='hi')"]]
    spec = make_task_file(
        tmp_path,
        [
            task("a"),
            task("bad_byte_MARK"),
            task("a"),
            task("b", question=[[{"role": "user", "content": 5}]]),
            task("c", excluded_function=7),
            task("d"),
        ],
        [{"id": i, "ground_truth": truth} for i in ("a", "bad_byte_MARK", "b", "c", "d")]
        + [{"id": "d", "ground_truth": [["not_the_first()"]]}],
    )
    spec.tasks.write_bytes(_with_bad_byte(spec.tasks.read_bytes(), "bad_byte_MARK"))
    results = list(iter_tasks([spec]))
    tasks = [r for r in results if not isinstance(r, TaskIssue)]
    assert [t.task_id for t in tasks] == ["a", "d"]
    assert tasks[1].ground_truth == truth  # the first answer of "d" is kept
    issues = {i.origin: i for i in results if isinstance(i, TaskIssue)}
    assert set(issues) == {
        "custom_tasks.json:2",
        "custom_tasks.json:3",
        "custom_tasks.json:4",
        "custom_tasks.json:5",
        "custom_answers.json:6",
    }
    assert "not valid UTF-8: byte 0xff at column" in issues["custom_tasks.json:2"].reason
    assert (
        "duplicate task id 'a'" in issues["custom_tasks.json:3"].reason
        and "custom_tasks.json:1" in issues["custom_tasks.json:3"].reason
    )
    assert "'question'" in issues["custom_tasks.json:4"].reason
    assert "'excluded_function'" in issues["custom_tasks.json:5"].reason
    assert "duplicate answer id 'd'" in issues["custom_answers.json:6"].reason


@pytest.fixture()
def bad_histories(tmp_path, bad_corpus):
    env = {"source": "envscaler", "env_id": "envscaler/good", "init_config": {"stock": {"apple": 3}, "till": 0}}
    lines = [
        json.dumps(
            {
                "task_id": "h1",
                "env_id": "good",
                "init_config": {"stock": {"apple": 3}, "till": 0},
                "messages": SELL_COUNT,
            }
        ),
        json.dumps({"task_id": "h-bogus", "env": {"bogus": 1}, "messages": SELL_COUNT}),
        json.dumps({"task_id": "h-opts", "env": env, "messages": SELL_COUNT}),  # envscaler env without its options
        json.dumps({"task_id": "h-msgs", "env_id": "good", "messages": "hello"}),
        json.dumps(
            {
                "task_id": "h-calls",
                "env_id": "good",
                "messages": [
                    {"role": "assistant", "tool_calls": 5},
                    {"role": "assistant", "tool_calls": [{"function": {"name": 3}}]},
                ],
            }
        ),
        json.dumps({"task_id": "h-byte", "env_id": "good", "messages": [{"role": "user", "content": "naMARK"}]}),
        json.dumps({"task_id": "h1", "env_id": "good", "messages": []}),
        json.dumps([1, 2]),
        json.dumps(
            {
                "task_id": "h2",
                "env_id": "envscaler/good",
                "init_config": {"stock": {"pear": 1}, "till": 0},
                "messages": SELL_COUNT[:2],
            }
        ),
    ]
    path = tmp_path / "histories.jsonl"
    path.write_bytes(_with_bad_byte("\n".join(lines).encode() + b"\n", "naMARK"))
    return sources_config(
        bfcl={"categories": [], "replay": False},
        builtin={"enabled": False},
        envscaler=bad_corpus.sections["envscaler"],
        message_histories=[path],
    )


def test_history_lines_with_bad_env_shapes_or_bytes_are_issues(bad_histories):
    items, _ = env_items(bad_histories)
    out = list(history_trajectories(bad_histories, items))
    trajectories = [t for t in out if not isinstance(t, TaskIssue)]
    assert [(t.task_id, len(t.actions)) for t in trajectories] == [("h1", 2), ("h-calls", 0), ("h2", 2)]
    issues = {}
    for i in out:
        if isinstance(i, TaskIssue):
            issues[(i.task_id, i.origin)] = issues.get((i.task_id, i.origin), "") + i.reason + " | "
    assert "'env' has unknown field(s) ['bogus']" in issues[("h-bogus", "histories.jsonl:2")]
    assert "'env.options' lacks ['class_name', 'code_ref', 'tools_ref']" in issues[("h-opts", "histories.jsonl:3")]
    assert "'messages' must be a list" in issues[("h-msgs", "histories.jsonl:4")]
    assert "'tool_calls' is a int" in issues[("h-calls", "histories.jsonl:5")]
    assert (
        "tool call 3 not replayed: not a function call with a string name" in issues[("h-calls", "histories.jsonl:5")]
    )
    assert "not valid UTF-8: byte 0xff" in issues[("histories.jsonl:6", "histories.jsonl:6")]
    assert (
        "duplicate task id" in issues[("h1", "histories.jsonl:7")]
        and "histories.jsonl:1" in issues[("h1", "histories.jsonl:7")]
    )
    assert "expected a JSON object" in issues[("histories.jsonl:8", "histories.jsonl:8")]


def test_catalog_and_trajectories_continue_past_bad_records(tmp_path, bad_histories):
    """The catalog and the collection run over the bad corpus and histories: the good records are
    catalogued and replayed, every bad one is stored as an issue naming its file and record."""
    layout = DataLayout.at(tmp_path / "data")
    items, item_issues = env_items(bad_histories)
    catalog = build_catalog(layout, items, item_issues)
    assert {e["env_id"] for e in catalog["catalog"].rows} >= {
        "envscaler/good",
        "envscaler/params_str",
        "envscaler/second_only",
    }
    with Sandbox(workers=1, limits=Limits(call_timeout_s=5)) as box:
        result = collect_all(bad_histories, layout, box)
    stored = pq.read_table(layout.trajectories).to_pylist()
    assert sorted(r["task_id"] for r in stored) == ["h-calls", "h1", "h2"]
    issues = pq.read_table(layout.collection_issues).to_pylist()
    origins = {r["origin"] for r in issues}
    assert {
        "envs.json:bad_byte",
        "envs.json:tools_int",
        "envs.json:good (occurrence 2)",
        "more_envs.json[0]:params_str",
        "histories.jsonl:2",
        "histories.jsonl:6",
        "histories.jsonl:7",
    } <= origins
    assert any("\\udcff" in r["reason"] or "0xff" in r["reason"] for r in issues)
    assert result.report.trajectories == 3
