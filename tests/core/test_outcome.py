import dataclasses
import json
import re
from pathlib import Path

import pytest

from pipeline.collect.reuse import fingerprint
from pipeline.collect.sources import SourceConfig
from pipeline.core.environment import CallResult
from pipeline.core.outcome import (
    DEFAULT_RULE_ID,
    ERROR,
    FAILURE,
    RULE_OPTION,
    SUCCESS,
    OutcomeRuleError,
    args_count,
    default_outcome,
    labeler,
    parse_rule,
    reports_failure,
)
from pipeline.core.trajectory import Action, Trajectory
from pipeline.envs import envscaler
from pipeline.envs.bfcl import BfclEnvironment
from pipeline.envs.config import EnvScalerCorpus, SourceError
from pipeline.envs.registry import sources_config
from pipeline.execution.child import Limits
from pipeline.execution.sandbox import Sandbox
from pipeline.labeling.steps import part_key
from tests.support.envscaler_corpus import COUNTER_CODE


@pytest.mark.parametrize(
    "tool, value, failed",
    [
        ("cd", {"error": "cd: folder: No such directory"}, True),
        ("cd", {"current_working_directory": "/a"}, False),
        ("login", {"login_status": False, "message": "User not found"}, True),
        ("message_get_login_status", {"login_status": False}, False),  # a query, not a failure
        ("authenticate_twitter", {"authentication_status": False}, True),
        ("follow_user", {"follow_status": True}, False),
        ("close_ticket", {"success": False}, True),
        ("find", [{"error": "a"}, "Error: b"], True),
        ("find", [{"error": "a"}, {"ok": 1}], False),
        ("find", [], False),
        ("echo", "Error: bad thing", True),
        ("echo", "all good", False),
        ("mean", 3.5, False),
    ],
)
def test_failure_signals(tool, value, failed):
    assert reports_failure(tool, value) is failed


def test_bfcl_outcome_and_observation():
    env = BfclEnvironment(["MathAPI"])
    ok = CallResult(value={"result": 3.0})
    err = CallResult(error_type="TypeError", error_message="bad arg")
    assert env.outcome("add", ok) == "success"
    assert env.outcome("add", CallResult(value={"error": "x"})) == "failure"
    assert env.outcome("add", err) == "error"
    assert env.observation(ok) == '{"result": 3.0}'  # bfcl renders dicts with json.dumps
    assert env.observation(err) == "Error during execution: bad arg"


def test_args_count_is_top_level():
    assert args_count({}) == 0
    assert args_count({"a": {"nested": 1, "more": 2}, "b": [1, 2]}) == 2


ACEBENCH_REFUSAL = {"status": False, "message": "Reminder ID does not exist."}


@pytest.mark.parametrize(
    "value, failed",
    [
        (ACEBENCH_REFUSAL, True),
        (str(ACEBENCH_REFUSAL), True),  # as the EnvScaler adapter's observation: str(return value)
        ('{"status": false, "message": "Reminder ID does not exist."}', True),  # as JSON text
        ({"status": True, "message": "Reminder deleted."}, False),
        ({"ok": False}, True),
        ({"ok": True, "data": 1}, False),
        ({"status": "failed"}, True),
        ({"status": "FAILURE", "reason": "x"}, True),
        ({"status": " error "}, True),
        ({"status": "Error: no such user"}, True),
        ({"status": "pending"}, False),
        ({"errors": ["name is required"]}, True),
        ({"errors": {"name": "required"}}, True),
        ({"errors": []}, False),  # an empty errors list reports no error
        ({"errors": None, "data": 1}, False),
        ({"error": None, "data": 1}, False),
        ({"error": ""}, False),
        ({"success": True, "error": None}, False),
        ({"success": True, "errors": ["ignored: the explicit flag decides"]}, False),
        ({"success": False, "error": "unknown item"}, True),  # EnvScaler's own convention
        ([ACEBENCH_REFUSAL, {"ok": False}], True),
        ([ACEBENCH_REFUSAL, {"ok": True}], False),
        ("Error: bad", True),
        ("{'status': False, 'message': 'unterminated", False),  # not a literal: matched as text
        ({"1": {"title": "x"}}, False),  # a bare dict of data (ACEBench listings)
    ],
)
def test_default_rule_knows_the_common_conventions(value, failed):
    assert reports_failure("delete_reminder", value) is failed


def test_a_raised_call_stays_an_error_whatever_the_rule():
    rule = parse_rule({"failure_if": [{"text_contains": "x"}], "extends_default": False})
    assert default_outcome("t", True, ACEBENCH_REFUSAL) == ERROR
    assert rule.outcome("t", True, {"success": True}) == ERROR
    assert labeler(default_outcome, {RULE_OPTION: rule.id})("t", True, None) == ERROR


def test_a_declared_rule_is_a_small_predicate_over_the_observation():
    rule = parse_rule(
        {
            "failure_if": [
                {"key": "code", "in": [400, 404]},
                {"key": "status", "equals": False},
                {"text_starts_with": "sorry"},
                {"key": "msg", "starts_with": "denied"},
                {"key": "problems", "not_empty": True},
                {"text_contains": "not found"},
            ]
        }
    )
    fails = lambda v: rule.outcome("t", False, v) == FAILURE
    assert fails({"code": 404, "msg": "x"}) and fails(str({"code": 400})) and not fails({"code": 200, "data": 1})
    assert not fails({"code": "404"}) and not fails({"code": True})  # JSON equality: a text or a bool is not 404
    assert fails({"status": False}) and not fails({"status": 0})
    assert fails("Sorry, the book is out.") and fails("  SORRY") and not fails("No sorry")
    assert fails({"msg": "Denied: no access"}) and fails({"problems": ["x"]}) and not fails({"problems": []})
    assert fails("user not found here") and not fails({"note": "not found"})  # text_contains: text observations only
    assert fails({"ok": False})  # extends_default (default true): the default conventions too
    strict = parse_rule({"failure_if": [{"key": "code", "equals": 404}], "extends_default": False})
    assert strict.outcome("t", False, {"ok": False}) == SUCCESS and strict.outcome("t", False, {"code": 404}) == FAILURE
    assert rule.id != strict.id and parse_rule(json.loads(rule.id)).id == rule.id  # the id is canonical and round-trips
    assert (
        labeler(default_outcome, {}).id == DEFAULT_RULE_ID
        and labeler(default_outcome, {RULE_OPTION: strict.id}).id == strict.id
    )


@pytest.mark.parametrize(
    "raw, message",
    [
        (
            {"failure_if": [{"kye": "status", "equals": False}]},
            "outcome_rule.failure_if[0]: unknown key 'kye' (did you mean 'key'?)",
        ),
        (
            {"failure_if": [{"key": "status", "equal": False}]},
            "outcome_rule.failure_if[0]: unknown key 'equal' (did you mean 'equals'?)",
        ),
        (
            {"failures_if": [{"key": "a", "equals": 1}]},
            "outcome_rule: unknown key 'failures_if' (did you mean 'failure_if'?)",
        ),
        ({"failure_if": [{"key": "code", "in": 404}]}, "outcome_rule.failure_if[0]: 'in' must be a non-empty list"),
        ({"failure_if": []}, "outcome_rule.failure_if: must be a non-empty list"),
        ({"failure_if": [{"equals": False}]}, "outcome_rule.failure_if[0]: equals needs the observation key"),
        ({"failure_if": [{"key": "a"}]}, "outcome_rule.failure_if[0]: no test in one condition"),
        (
            {"failure_if": [{"key": "a", "equals": 1, "in": [2]}]},
            "outcome_rule.failure_if[0]: more than one test (equals, in)",
        ),
        (
            {"failure_if": [{"key": "a", "text_contains": "x"}]},
            "outcome_rule.failure_if[0]: text_contains tests the observation text",
        ),
        ({"failure_if": [{"key": "a", "not_empty": "yes"}]}, "outcome_rule.failure_if[0]: 'not_empty' takes true"),
        ({"failure_if": ["status"]}, "outcome_rule.failure_if[0]: a condition is a mapping"),
        (
            {"failure_if": [{"text_starts_with": "x"}], "extends_default": "no"},
            "outcome_rule.extends_default: must be true or false",
        ),
        ("status: false", "outcome_rule: must be a mapping"),
    ],
)
def test_a_mistyped_rule_is_one_line_naming_the_key_and_the_fix(raw, message):
    with pytest.raises(OutcomeRuleError) as exc:
        parse_rule(raw)
    text = str(exc.value)
    assert text.startswith(message) and "\n" not in text and "; " not in text
    with pytest.raises(
        SourceError, match=r"^resources\.sources\.config\.envscaler \(env_items c\.json\): outcome_rule"
    ):
        EnvScalerCorpus(Path("c.json"), outcome_rule=raw)


def test_the_rule_is_part_of_what_identifies_the_labeled_input(tmp_path):
    """A declared rule rides in the spec options: the trajectory fingerprint (collected labels, label parts'
    content keys) and the collection fingerprint change with it; no rule leaves both as they were."""
    item = envscaler.parse_env_item(
        "shop", {"env_class_name": "CounterShop", "env_class_code": COUNTER_CODE}, prefix="p"
    )
    one, two = (
        parse_rule({"failure_if": [{"key": "code", "equals": 404}]}),
        parse_rule({"failure_if": [{"key": "code", "equals": 400}]}),
    )

    def trajectory(rule):
        spec = (item if rule is None else dataclasses.replace(item, outcome_rule=rule.id)).spec({"stock": {}})
        return Trajectory("p/shop/t/explore-0", "t", spec, (Action("count", {}),))

    prints = {trajectory(r).fingerprint() for r in (None, one, two)}
    assert len(prints) == 3
    assert trajectory(None).env.options.keys() == {"class_name", "code_ref", "tools_ref"}  # the default: no new option
    rows = [[{"fingerprint": trajectory(r).fingerprint(), "initial_state_hash": "0" * 32}] for r in (one, two)]
    assert part_key(rows[0], Limits()) != part_key(rows[1], Limits())
    env_file = tmp_path / "env.json"
    env_file.write_text("{}")

    def collection(rule):
        cfg = sources_config(
            bfcl={"replay": False}, builtin={"enabled": False}, envscaler=[EnvScalerCorpus(env_file, outcome_rule=rule)]
        )
        return fingerprint(cfg, Sandbox(workers=1), None, None, None, None)

    assert (
        len(
            {
                collection(None),
                collection({"failure_if": [{"key": "code", "equals": 404}]}),
                collection({"failure_if": [{"key": "code", "equals": 400}]}),
            }
        )
        == 3
    )


def test_a_rule_declares_raises_that_are_refusals_with_their_observation():
    from pipeline.core.outcome import FAILURE, Labeler, OutcomeRuleError, default_outcome, parse_rule

    rule = parse_rule({"raises": [{"type": ["ValueError", "ValidationError"], "observation": "Error: {message}"}]})
    assert rule.refusal("ValueError", "line L9 not found") == "Error: line L9 not found"
    assert rule.refusal("ValidationError", "x") == "Error: x" and rule.refusal("KeyError", "x") is None
    assert parse_rule(json.loads(rule.id)) == rule
    labeler = Labeler(default_outcome, rule)
    assert labeler.refusal("ValueError", "no") == "Error: no" and labeler("t", False, "Error: no") == FAILURE
    assert Labeler(default_outcome).refusal("ValueError", "no") is None  # the default rule: a raise is an error
    # a rule without raises keeps its id (steps labeled under it are not relabeled)
    plain = parse_rule({"failure_if": [{"key": "code", "equals": 404}]})
    assert "raises" not in plain.id
    for bad, key in (
        ({"raises": [{"typ": "ValueError"}]}, "unknown key 'typ'"),
        ({"raises": [{"type": "not a name"}]}, "raises[0].type"),
        ({"raises": []}, "raises: must be a non-empty list"),
    ):
        with pytest.raises(OutcomeRuleError, match=re.escape(key)):
            parse_rule(bad)


def test_the_warn_of_a_corpus_that_refuses_by_raising_suggests_the_raises_rule():
    from pipeline.quality.outcomes import CorpusOutcomes

    found = CorpusOutcomes("tau", 500, 300, 0, problem="500 steps and not one labeled failure")
    found.refusing_raise = "ValueError"
    assert "declare outcome_rule: {raises: [{type: ValueError" in found.warning()
