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


def test_a_kinds_setting_written_beside_the_common_fields_names_its_section():
    """A simulator's endpoint fields written flat (the shape before kinds had their own settings) are refused
    in one line that names the section they belong in."""
    config = {"ops": {"simulator_eval": {"config": {"simulators": [
        {"name": "m", "kind": "openai", "model": "m", "base_url": "http://127.0.0.1:8000/v1"}]}}}}
    problems = check_launch(["--job", "envsim_main", "--config-json", json.dumps(config)])
    assert problems == ["--config-json: unknown config keys 'base_url', 'model' under "
                        "ops.simulator_eval.config.simulators.0: they belong in its `openai:` section: "
                        "openai: {base_url: …, model: …}"], problems
    config["ops"]["simulator_eval"]["config"]["simulators"][0] = {"name": "r", "kind": "recorded", "completions": "a"}
    assert check_launch(["--job", "envsim_main", "--config-json", json.dumps(config)]) == [
        "--config-json: unknown config key 'completions' under ops.simulator_eval.config.simulators.0: it belongs in "
        "its `recorded:` section: recorded: {completions: …}"]
