"""What ``./forge run`` checks first (``cli/launch.py``): the run config built once from the ``-c`` files and
``--config-json`` (a file listed first wins, the JSON over them all; an unreadable one is one line), and Dagster's
validation of it against the job, each error one line naming the key and the fix; on a corpus's outcome rule too. A
valid config launches: the run gets exactly the config that was checked, and the definitions it was checked against."""

import json

import pytest

from cli.launch import check_launch, load_run_config
from cli.renamed import RENAMED
from pipeline.core.settings import settings
from tests.support import refusal_corpus as rc


def _launch(tmp_path, rule):
    env_items, scenarios = rc.write(tmp_path / "codes", rc.CODES_ITEMS, rc.CODES_SCENARIOS)
    corpus = {"env_items": str(env_items), "scenarios": str(scenarios), "prefix": "codes", "outcome_rule": rule}
    sources = {"resources": {"sources": {"config": {"envscaler": [corpus]}}}}
    config, problems = load_run_config(config_json=json.dumps(sources))
    assert problems == []
    return check_launch("envsim_main", config, settings())


def test_a_mistyped_outcome_rule_key_is_one_line_naming_it_and_the_fix(tmp_path):
    (line,) = _launch(tmp_path, {"failure_if": [{"key": "code", "equal": 404}]})
    assert line.startswith("resources.sources.config.envscaler (env_items ")
    assert "outcome_rule.failure_if[0]: unknown key 'equal' (did you mean 'equals'?)" in line
    (line,) = _launch(tmp_path, {"failure": [{"key": "code", "equals": 404}]})
    assert "outcome_rule: unknown key 'failure' (did you mean 'failure_if'?)" in line


def test_a_valid_outcome_rule_launches(tmp_path):
    assert _launch(tmp_path, rc.CODES_RULE) == []


@pytest.mark.parametrize(
    ("resource", "key", "value", "says"),
    [
        ("sources", "bfcl_replay", False, "set resources.sources.config.bfcl.replay"),
        ("sources", "builtin_scenarios_per_env", 3, "set resources.sources.config.builtin.scenarios_per_env"),
        ("composition", "strict", True, "set resources.run_policy.config.strict"),
        ("composition", "explore_call_budget", 9, "set resources.run_policy.config.explore_call_budget"),
    ],
)
def test_a_key_of_an_earlier_release_is_one_line_naming_its_new_key(resource, key, value, says):
    """A run config written for an earlier release (flat ``sources`` fields, the run policy on ``composition``) is
    refused before anything starts, in one line from the one table of renamed keys (cli/renamed.py)."""
    (line,) = check_launch("envsim_main", {"resources": {resource: {"config": {key: value}}}}, settings())
    assert line.startswith(f"run config: config key resources.{resource}.config.{key} was renamed: ") and says in line
    assert "\n" not in line
    both = {"bfcl_replay": False, "builtin_seed": 1}
    (line,) = check_launch("envsim_main", {"resources": {"sources": {"config": both}}}, settings())
    assert "bfcl_replay was renamed" in line and "builtin_seed was renamed" in line and "\n" not in line


def _config_at(path: str) -> dict:
    """A run config that sets the dotted ``path`` (``name[]``: a list of one section) to null."""
    value: object = None
    for part in reversed(path.split(".")):
        value = {part[:-2]: [value]} if part.endswith("[]") else {part: value}
    return value  # type: ignore[return-value]


def test_every_renamed_key_names_a_key_the_run_config_has():
    """Each row of the table points at a key the current run config accepts (a rename of a rename is one row)."""
    for old, new in RENAMED.items():
        target = new.split(":")[0]
        assert target.replace("[]", "") not in RENAMED, (old, new)
        lines = check_launch("envsim_main", _config_at(target), settings())
        refused = [line for line in lines if "unknown config key" in line or "was renamed" in line]
        assert refused == [], (old, new, refused)


def test_a_key_no_resource_has_is_one_line_naming_the_valid_ones():
    """A run config that sets a key a resource does not have is refused before anything starts, in one line that
    names the key, where it was and the keys that section has."""
    (line,) = check_launch("envsim_main", {"resources": {"composition": {"config": {"strictly": True}}}}, settings())
    assert line.startswith("run config: ") and "'strictly'" in line and "composition" in line, line
    assert "\n" not in line


def _yaml(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_the_first_file_wins_and_the_json_over_all(tmp_path):
    first = _yaml(tmp_path, "first.yaml", "ops:\n  benchmark_split:\n    config:\n      seed: 1\n")
    second = _yaml(
        tmp_path,
        "second.yaml",
        "ops:\n  benchmark_split:\n    config:\n      seed: 2\n  sft_mixture:\n    config:\n      seed: 5\n",
    )
    config, problems = load_run_config([first, second])
    assert problems == []
    assert config == {"ops": {"benchmark_split": {"config": {"seed": 1}}, "sft_mixture": {"config": {"seed": 5}}}}
    config, _ = load_run_config([first, second], json.dumps({"ops": {"sft_mixture": {"config": {"seed": 9}}}}))
    assert config["ops"] == {"benchmark_split": {"config": {"seed": 1}}, "sft_mixture": {"config": {"seed": 9}}}


def test_a_run_builds_the_definitions_once_and_its_record_is_in_the_data_roots_history(tmp_path, monkeypatch, capfd):
    """``./forge run``: the definitions are built once (the check validates against the object the run executes),
    the run is recorded in the data root's run history (what ``./forge ui`` opens) tagged with the root, and a failed
    step ends the output with ``./forge run: FAILED at step X``, exit 1. The corpus yields no environment, so the
    run stops at its first step."""
    from dagster import DagsterInstance

    from assets import definitions as code_location
    from cli.entry import main
    from resources.storage import DATA_ROOT_TAG

    builds = []
    build = code_location.build_definitions
    monkeypatch.setattr(code_location, "build_definitions", lambda current: builds.append(current) or build(current))
    monkeypatch.setenv("ENVSIM_DATA_ROOT", str(tmp_path / "data"))
    monkeypatch.setenv("DAGSTER_HOME", "")
    corpus = tmp_path / "191_env_metadata.json"
    corpus.write_text("{}")
    config = tmp_path / "run.yaml"
    config.write_text(
        "resources:\n  sources:\n    config:\n      builtin: {enabled: false}\n      bfcl: {categories: []}\n"
        f"      envscaler:\n        - {{env_items: {corpus}}}\n"
    )
    assert main(["run", "-c", str(config), "--seed", "3"]) == 1
    assert len(builds) == 1 and builds[0].data_root == tmp_path / "data" and builds[0].executor == "in_process"
    err = capfd.readouterr().err.splitlines()
    assert err[-1] == "./forge run: FAILED at step environment_catalog (exit 1)", err[-5:]
    assert any(line.startswith("step environment_catalog failed: ") for line in err), err[-5:]
    with DagsterInstance.from_config(str(tmp_path / "data" / ".dagster_home")) as instance:
        (run,) = instance.get_runs()
    assert run.job_name == "envsim_main" and run.tags[DATA_ROOT_TAG] == str(tmp_path / "data")
    assert run.run_config["ops"]["benchmark_split"]["config"]["seed"] == 3  # the checked config, --seed included


def test_regenerate_runs_the_schedules_job_now_in_the_data_roots_history(tmp_path, monkeypatch, capfd):
    """``./forge regenerate``: the job of ``weekly_splits`` (``regenerate_splits``) runs now, on the data root's run
    history (the one ``./forge ui`` shows), with this ISO week's seed as the schedule would draw it (or ``--seed``);
    on a root without labeled steps its first step fails with one line."""
    from datetime import UTC, datetime

    from dagster import DagsterInstance

    from cli.entry import main
    from resources.storage import DATA_ROOT_TAG

    monkeypatch.setenv("ENVSIM_DATA_ROOT", str(tmp_path / "data"))
    monkeypatch.setenv("DAGSTER_HOME", "")
    assert main(["regenerate"]) == 1
    captured = capfd.readouterr()
    err = captured.err.splitlines()
    assert err[-1] == "./forge run: FAILED at step step_strata (exit 1)", err[-5:]
    assert "Stack Trace" not in captured.out + captured.err  # the console's failure events stop before their stack
    assert main(["regenerate", "--seed", "7"]) == 1
    with DagsterInstance.from_config(str(tmp_path / "data" / ".dagster_home")) as instance:
        runs = instance.get_runs()
    assert [r.job_name for r in runs] == ["regenerate_splits"] * 2
    week = int(datetime.now(UTC).strftime("%G%V"))
    assert [r.tags["split_seed"] for r in runs] == ["7", str(week)]
    assert runs[1].run_config["ops"]["benchmark_split"]["config"]["seed"] == week
    assert all(r.tags[DATA_ROOT_TAG] == str(tmp_path / "data") for r in runs)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (None, "run config file {path} does not exist: pass an existing YAML file to -c/--config"),
        ("ops: [unclosed\n", "run config file {path} is not valid YAML ("),
        ("- ops\n", "run config file {path} holds a list, not a mapping: write ops:/resources: keys at its top level"),
    ],
)
def test_an_unreadable_file_is_one_line_naming_it(tmp_path, text, expected):
    path = tmp_path / "run.yaml"
    if text is not None:
        path.write_text(text)
    config, problems = load_run_config([str(path)])
    (line,) = problems
    assert line.startswith(expected.format(path=path)), line


@pytest.mark.parametrize("text", ["{ops: 1}", "[1]", "3"])
def test_config_json_that_is_not_an_object_is_one_line(text):
    _, (line,) = load_run_config(config_json=text)
    assert line.startswith("--config-json is not a JSON object (") and line.endswith("""pass e.g. '{"ops": {}}'""")


def test_dagster_validates_the_run_config_one_line_per_error():
    (line,) = check_launch(
        "envsim_main", {"ops": {"benchmark_split": {"config": {"seeed": 1}}}}, settings(), where="a.yaml"
    )
    assert line == (
        "a.yaml: unknown config key 'seeed' under ops.benchmark_split.config: did you mean 'seed'? "
        "valid keys: " + line.split("valid keys: ", 1)[1]
    )
    (line,) = check_launch("envsim_main", {"ops": {"benchmark_split": {"config": {"sede": 1, "sed": 2}}}}, settings())
    assert line.startswith("run config: unknown config keys ") and "'sede'" in line and "'sed'" in line
    assert "under ops.benchmark_split.config: valid keys: " in line and "seed" in line
    (line,) = check_launch("envsim_main", {"ops": {"benchmark_split": {"config": {"seed": "one"}}}}, settings())
    assert line == (
        "run config: config value 'one' at ops.benchmark_split.config.seed has the wrong type "
        "(expected Int): fix the value"
    )


def test_a_kinds_setting_written_beside_the_common_fields_names_its_section():
    """A simulator's endpoint fields written flat (the shape before kinds had their own settings) are refused
    in one line that names the section they belong in."""
    config = {
        "ops": {
            "simulator_eval": {
                "config": {
                    "simulators": [
                        {"name": "m", "kind": "openai", "model": "m", "base_url": "http://127.0.0.1:8000/v1"}
                    ]
                }
            }
        }
    }
    problems = check_launch("envsim_main", config, settings(), where="--config-json")
    assert problems == [
        "--config-json: unknown config keys 'base_url', 'model' under "
        "ops.simulator_eval.config.simulators.0: they belong in its `openai:` section: "
        "openai: {base_url: …, model: …}"
    ], problems
    config["ops"]["simulator_eval"]["config"]["simulators"][0] = {"name": "r", "kind": "recorded", "completions": "a"}
    assert check_launch("envsim_main", config, settings(), where="--config-json") == [
        "--config-json: unknown config key 'completions' under ops.simulator_eval.config.simulators.0: it belongs in "
        "its `recorded:` section: recorded: {completions: …}"
    ]


@pytest.mark.parametrize("value", [False, True])
def test_a_boolean_where_a_source_section_belongs_names_the_enabled_form(value):
    """``builtin: false`` (a source switched off by a boolean) is one line naming ``{enabled: false}``."""
    (line,) = check_launch("envsim_main", {"resources": {"sources": {"config": {"builtin": value}}}}, settings())
    flag = str(value).lower()
    assert line == (
        f"run config: config value {flag} at resources.sources.config.builtin is a section: "
        f"write builtin: {{enabled: {flag}}}"
    )


def test_the_forked_run_finalizes_nothing_it_inherited(tmp_path):
    """``./forge run`` forks its run (cli.launch._supervise): garbage the process held is finalized before the fork,
    in the process that made it, and never in the child, where a C object's finalizer (a DuckDB or SQLite
    connection made by another thread) can crash it."""
    import gc
    import os

    from cli.launch import _supervise

    log = tmp_path / "finalized"

    class Cycle:
        def __del__(self):
            with log.open("a") as fh:
                fh.write(f"{os.getpid()}\n")

    gc.disable()  # the cycle stays garbage, uncollected, until someone collects it
    try:
        cycle = Cycle()
        cycle.me = cycle
        del cycle

        def work() -> int:
            gc.collect()  # what the run's own collections would do with anything it inherited
            return 7

        assert _supervise(work, None, "") == 7
    finally:
        gc.enable()
    assert log.read_text().split() == [str(os.getpid())]
