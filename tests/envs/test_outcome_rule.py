"""Outcome labels that fit the corpus, end to end through collection and the real labeling path
(docs/definitions.md §4.3, docs/environments.md "Outcome rule").

Two corpora of our own in EnvScaler's released format (tests/support/refusal_corpus.py): ``codes`` refuses
with ``{"code": 404|400, "msg": ...}`` or "Sorry, ..." texts — a convention the default rule cannot know —
and ``acebench`` refuses ACEBench-style with ``{"status": False, "message": ...}``.
"""

import json

import pyarrow.parquet as pq
import pytest

from pipeline.collect.explore import ExploreSettings
from pipeline.collect.run import collect_all
from pipeline.collect.sources import SourceConfig, env_items
from pipeline.core.outcome import DEFAULT_RULE_ID, observation_value, parse_rule
from pipeline.envs.catalog import build_catalog
from pipeline.envs.config import EnvScalerCorpus
from pipeline.envs.registry import sources_config
from pipeline.execution.child import Limits
from pipeline.execution.sandbox import Sandbox
from pipeline.labeling.steps import label
from pipeline.quality.outcomes import CHECK, MIN_STEPS, check_outcomes
from pipeline.store.layout import DataLayout
from tests.support import refusal_corpus as rc

#: the ``codes`` convention with only "not found" as a refusal: a change of rule
NARROWER = {"failure_if": [{"key": "code", "equals": 404}]}


@pytest.fixture(scope="module")
def box():
    with Sandbox(workers=2, limits=Limits(call_timeout_s=5, memory_mb=512)) as sandbox:
        yield sandbox


def _config(tmp, rule):
    codes = rc.write(tmp / "codes", rc.CODES_ITEMS, rc.CODES_SCENARIOS)
    ace = rc.write(tmp / "acebench", rc.ACEBENCH_ITEMS, rc.ACEBENCH_SCENARIOS)
    return sources_config(
        bfcl={"replay": False},
        builtin={"enabled": False},
        envscaler=[
            EnvScalerCorpus(*codes, prefix="codes", outcome_rule=rule, explore_class_defaults=False),
            EnvScalerCorpus(*ace, prefix="acebench", explore_class_defaults=False),
        ],
    )


def _run(tmp, layout, rule, box):
    cfg = _config(tmp, rule)
    items, issues = env_items(cfg)
    assert not issues
    build_catalog(layout, items, issues)
    settings = ExploreSettings(call_budget=450, episode_length=6, batch_episodes=30, min_envs=1)
    collected = collect_all(cfg, layout, box, settings)
    labeled = label(layout, box)
    steps = pq.read_table(
        layout.step_parts(),
        columns=["step_id", "env_id", "raw_observation", "observation_json", "outcome", "outcome_rule"],
    ).to_pylist()
    return collected, labeled, steps


@pytest.fixture(scope="module")
def runs(tmp_path_factory, box):
    """The corpora labeled by the default rule (own data root); with ``codes``'s rule declared, then the
    same data root again with a narrower rule, then once more unchanged."""
    tmp = tmp_path_factory.mktemp("refusals")
    default_layout = DataLayout.at(tmp / "data-default")
    declared_layout = DataLayout.at(tmp / "data-declared")
    out = {"default": (default_layout, *_run(tmp, default_layout, None, box))}
    out["declared"] = (declared_layout, *_run(tmp, declared_layout, rc.CODES_RULE, box))
    out["declared_report"] = check_outcomes(declared_layout)
    out["narrower"] = (declared_layout, *_run(tmp, declared_layout, NARROWER, box))
    out["again"] = (declared_layout, *_run(tmp, declared_layout, NARROWER, box))
    return out


def _is_refusal(observation: str) -> bool:
    value = observation_value(observation)
    return (
        isinstance(value, dict) and (value.get("code") in (400, 404) or value.get("status") is False)
    ) or observation.startswith("Sorry")


def test_the_default_rule_finds_acebench_refusals_but_not_a_convention_it_cannot_know(runs):
    _, _, _, steps = runs["default"]
    codes = [s for s in steps if s["env_id"].startswith("codes/")]
    ace = [s for s in steps if s["env_id"].startswith("acebench/")]
    assert len(codes) >= MIN_STEPS and ace
    assert {s["outcome"] for s in codes} == {"success"}  # 404/400/"Sorry" are not in the default conventions
    refusals = [s for s in ace if "Reminder ID does not exist." in s["raw_observation"]]
    assert refusals and {s["outcome"] for s in refusals} == {"failure"}
    assert refusals[0]["raw_observation"] == "{'status': False, 'message': 'Reminder ID does not exist.'}"  # str(dict)
    assert {s["outcome"] for s in ace if "'status': True" in s["raw_observation"]} == {"success"}
    assert {s["outcome_rule"] for s in steps} == {DEFAULT_RULE_ID}


def test_a_declared_rule_labels_the_corpus_refusals_and_is_recorded_with_every_step(runs):
    _, _, _, steps = runs["declared"]
    codes = [s for s in steps if s["env_id"].startswith("codes/")]
    wrong = [
        (s["step_id"], s["raw_observation"], s["outcome"])
        for s in steps
        if s["outcome"] != "error" and (s["outcome"] == "failure") != _is_refusal(s["raw_observation"])
    ]
    assert not wrong, wrong[:5]
    assert {s["outcome"] for s in codes} == {"success", "failure"}
    assert any(
        s["raw_observation"].startswith("Sorry") and s["outcome"] == "failure" for s in codes
    )  # text_starts_with
    assert {s["outcome_rule"] for s in codes} == {parse_rule(rc.CODES_RULE).id}
    assert json.loads(codes[0]["outcome_rule"]) == {"extends_default": True, "failure_if": rc.CODES_RULE["failure_if"]}
    assert {s["outcome_rule"] for s in steps if s["env_id"].startswith("acebench/")} == {
        DEFAULT_RULE_ID
    }  # per corpus entry


def test_a_change_of_rule_is_a_new_input_labeled_again(runs):
    _, collected, labeled, steps = runs["narrower"]
    assert not collected.reused and labeled.parts_reused == 0 and labeled.parts_written > 0
    codes = [s for s in steps if s["env_id"].startswith("codes/")]
    assert {s["outcome_rule"] for s in codes} == {parse_rule(NARROWER).id}
    for s in codes:
        value = observation_value(s["raw_observation"])
        want = "failure" if isinstance(value, dict) and value.get("code") == 404 else "success"
        assert s["outcome"] == want, s  # 400 and "Sorry" are successes under the narrower rule
    _, collected, labeled, _ = runs["again"]  # the same rule again: nothing collected or labeled anew
    assert collected.reused and labeled.parts_written == 0 and labeled.parts_reused == runs["narrower"][2].parts_written


def test_the_check_warns_on_a_corpus_without_failures_naming_it_and_an_example(runs):
    layout = runs["default"][0]
    report = check_outcomes(layout)
    assert not report.ok and [c.corpus for c in report.findings] == ["codes"]
    (line,) = report.warnings()
    assert line.startswith("corpus 'codes': ") and "not one labeled failure" in line and "outcome_rule" in line
    example = report.findings[0].example
    assert _is_refusal(example) and example in line  # the likeliest refusal: a deliberately mutated call's answer
    rows = {c.corpus: c for c in report.corpora}
    assert rows["acebench"].problem is None and rows["acebench"].failures > 0


def test_the_check_passes_once_the_rule_is_declared(runs):
    report = runs["declared_report"]
    assert report.ok, report.warnings()
    assert {c.corpus for c in report.corpora} == {"codes", "acebench"}
    assert all(0 < c.share <= 0.6 for c in report.corpora)


def test_the_summary_names_the_failed_check(runs, capsys):
    from cli.summary import summary

    assert summary(runs["default"][0]) == 0  # a WARN: named, the run goes on
    err = capsys.readouterr().err
    (line,) = [line for line in err.splitlines() if CHECK in line]
    assert line.startswith(f"WARN CHECK {CHECK}: corpus 'codes'")


def test_a_single_source_s_rule_is_parsed_once_and_carried_by_every_task_it_gives(monkeypatch):
    """The builtin source's declared rule is parsed when its settings are read; every exploration and agent task
    the source then gives carries it, with no second parse (one home: the source's base class applies it)."""
    from pipeline.core.outcome import RULE_OPTION
    from pipeline.envs import config, registry

    cfg = sources_config(builtin={"scenarios_per_env": 1, "outcome_rule": NARROWER}, bfcl={"categories": ()})
    builtin = registry.SOURCES.get("builtin")
    expected = parse_rule(NARROWER).id

    def refuse(*_):
        raise AssertionError("the rule was parsed again")

    monkeypatch.setattr(config, "parse_rule", refuse)
    items, _ = env_items(cfg)
    tasks, _ = builtin.ruled_scenarios(cfg, items, None)
    agent = builtin.ruled_agent_tasks(cfg, items)
    assert tasks and agent
    assert {t.env.options.get(RULE_OPTION) for t in tasks + agent} == {expected}
    plain, _ = builtin.scenarios(cfg, items, None)  # what the source itself gives: no rule of its own
    assert {t.env.options.get(RULE_OPTION) for t in plain} == {None}
