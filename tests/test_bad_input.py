"""Bad input is reported with the task id and reason; everything else is still labeled."""

import pyarrow.parquet as pq
import pytest

from pipeline.collect.collector import collect
from pipeline.collect.replay import ground_truth_trajectories
from pipeline.envs.bfcl_tasks import iter_tasks
from pipeline.execution.runner import Limits
from pipeline.execution.sandbox import Sandbox
from pipeline.labeling.labeler import label
from pipeline.store.layout import DataLayout
from pipeline.store.reconstruct import verify_steps
from tests.bad_tasks import bad_task_file


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
    assert any(i["task_id"] == "hangs" and "square_root" in i["reason"] and "exceeded" in i["reason"]
               for i in labeled.issues)
    assert verify_steps(layout).ok
