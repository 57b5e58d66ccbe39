"""What the ``trajectories`` asset reports of a collection, computed in the pipeline (``CollectionResult.facts``): the
asset only logs the warnings and turns the values into metadata (``assets.metadata.metadata_of``)."""

from collections import Counter
from pathlib import Path

from pipeline.collect.collector import CollectReport
from pipeline.collect.explore import Coverage, ExploreSettings
from pipeline.collect.result import CollectionResult
from pipeline.core.issues import TaskIssue
from pipeline.core.strata import Cell, Composition
from pipeline.report.tables import Markdown, Table
from pipeline.store.layout import DataLayout


def _result(**given) -> CollectionResult:
    report = CollectReport(
        3,
        7,
        [TaskIssue("t9", "parse", "line is not JSON", "tasks.jsonl:4")],
        Counter({"base": 3}),
        Counter({"bfcl/A": 2, "bfcl/B": 1}),
        Counter({"replay": 3}),
    )
    return CollectionResult(report, given.pop("coverage", None), **given)


def test_the_facts_of_a_replay_only_collection(tmp_path):
    facts = _result().facts(DataLayout.at(tmp_path), agent_model=None)
    values = facts.values
    assert (values["trajectories"], values["actions"], values["environments"], values["rejected_tasks"]) == (3, 7, 2, 1)
    assert values["reused"] is False and values["path"] == DataLayout.at(tmp_path).trajectories.resolve()
    assert values["by_strategy"] == Table([{"strategy": "replay", "trajectories": 3}], ["strategy", "trajectories"])
    assert values["by_category"] == Table([{"category": "base", "trajectories": 3}], ["category", "trajectories"])
    assert values["rejected"].rows[0]["reason"] == "line is not JSON"
    assert values["agent"].startswith("skipped: no model endpoint configured")
    assert "exploration_calls" not in values and "without_scenarios" not in values
    assert facts.warnings == ["task t9 (parse): line is not JSON"]


def test_environments_without_scenarios_the_agent_and_coverage_are_reported_and_warned(tmp_path):
    coverage = Coverage(ExploreSettings(min_envs=1), Composition((Cell("reads", "no_change", 5, "success", 0, 0),), {}))
    coverage.add("builtin/retail", "list_items", "success", 0, 0)
    result = _result(
        coverage=coverage,
        without_scenarios=["envscaler/x", "envscaler/y"],
        agent_episodes=[{"status": "done", "events": [{"kind": "call"}, {"kind": "call"}]}],
    )
    facts = result.facts(DataLayout.at(tmp_path), agent_model="m")
    values = facts.values
    assert values["environments_without_scenarios"] == 2
    assert values["without_scenarios"] == Markdown(
        "not explored (explore_class_defaults is off):\n\n- envscaler/x\n- envscaler/y"
    )
    assert values["agent"] == "1 episodes with m: {'done': 1}; events {'call': 2}"
    assert values["exploration_calls"] == 1
    assert values["exploration_coverage"].columns == ["cell", "target", "candidates", "environments", "status"]
    assert values["exploration_coverage"].rows[0]["cell"] == "reads"
    assert facts.warnings[1] == (
        "2 corpus environments have no scenario; not explored (explore_class_defaults is off): envscaler/x, envscaler/y"
    )
    assert all(isinstance(v, (str, int, bool, float, Path, Table, Markdown)) or v is None for v in values.values())


def test_environments_without_scenarios_are_reported_by_what_exploration_did_with_each(tmp_path):
    """A corpus that explores its unnamed environments from their class defaults and one that does not, in one run:
    each environment is listed under what happened to it (the collection records which were explored)."""
    result = _result(without_scenarios=["a/x", "b/y", "a/z"], explored_without=["a/x", "a/z"])
    facts = result.facts(DataLayout.at(tmp_path), agent_model=None)
    assert facts.values["environments_without_scenarios"] == 3
    assert facts.values["without_scenarios"] == Markdown(
        "explored from their class defaults (init config {}):\n\n- a/x\n- a/z\n\n"
        "not explored (explore_class_defaults is off):\n\n- b/y"
    )
    assert facts.warnings[1:] == [
        "2 corpus environments have no scenario; explored from their class defaults (init config {}): a/x, a/z",
        "1 corpus environments have no scenario; not explored (explore_class_defaults is off): b/y",
    ]
