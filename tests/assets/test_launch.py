"""``check-launch`` (what ``./forge run`` runs first) on a corpus's outcome rule: a mistake is one line
naming the key and the fix, before any run starts; a valid rule launches."""

import json

from assets.launch import check_launch
from tests.support import refusal_corpus as rc


def _launch(tmp_path, rule):
    env_items, scenarios = rc.write(tmp_path / "codes", rc.CODES_ITEMS, rc.CODES_SCENARIOS)
    corpus = {"env_items": str(env_items), "scenarios": str(scenarios), "prefix": "codes", "outcome_rule": rule}
    config = {"resources": {"sources": {"config": {"envscaler": [corpus]}}}}
    return check_launch(["--job", "envsim_main", "--config-json", json.dumps(config)])


def test_a_mistyped_outcome_rule_key_is_one_line_naming_it_and_the_fix(tmp_path):
    (line,) = _launch(tmp_path, {"failure_if": [{"key": "code", "equal": 404}]})
    assert line.startswith("resources.sources.config.envscaler (env_items ")
    assert "outcome_rule.failure_if[0]: unknown key 'equal' (did you mean 'equals'?)" in line
    (line,) = _launch(tmp_path, {"failure": [{"key": "code", "equals": 404}]})
    assert "outcome_rule: unknown key 'failure' (did you mean 'failure_if'?)" in line


def test_a_valid_outcome_rule_launches(tmp_path):
    assert _launch(tmp_path, rc.CODES_RULE) == []
