"""``build_definitions(settings)`` takes the profile from the ``Settings`` value, not from the process
environment: the resources carry the profile's defaults, and the assets resolve unset config from them."""

import pytest

from assets.collection import CollectionConfig
from assets.definitions import build_definitions
from pipeline.core import profile
from pipeline.core.settings import Settings


@pytest.mark.parametrize("name", ["default", "small"])
def test_the_profile_of_the_value_reaches_the_resources(name, monkeypatch):
    monkeypatch.setenv("ENVSIM_PROFILE", "small" if name == "default" else "default")  # the environment says otherwise
    chosen = profile.named(name)
    resources = build_definitions(Settings(profile=name)).resources
    policy, composition = resources["run_policy"], resources["composition"]
    budget = {"default": 60_000, "small": 1_500}[name]
    assert policy.explore_call_budget == budget and policy.on_shortfall == "warn"
    assert composition.composition() == chosen.composition()
    sources = resources["sources"]
    assert (
        tuple(sources.bfcl.categories)
        == {"default": ("base", "long_context", "miss_func", "miss_param"), "small": ("base",)}[name]
    )
    assert sources.builtin.scenarios_per_env == {"default": 300, "small": 12}[name]  # every source default, not one
    # an exploration config that leaves the budget unset scales it to the corpus, at most the resource's; one that
    # sets it wins
    unset = CollectionConfig().settings(policy.explore_call_budget)
    assert unset.call_budget is None and unset.max_call_budget == budget
    assert unset.budget(1_000) == budget
    assert CollectionConfig(call_budget=5).settings(policy.explore_call_budget).call_budget == 5


def test_an_unknown_profile_is_named_with_the_known_ones():
    with pytest.raises(ValueError, match=r"no profile 'tiny': name one of default, small, or the path"):
        Settings(profile="tiny")


def test_on_shortfall_is_a_closed_choice_or_unset():
    from pydantic import ValidationError

    from assets.selection import BenchmarkConfig

    assert BenchmarkConfig().on_shortfall is None  # the composition resource's (the profile's)
    assert BenchmarkConfig(on_shortfall="warn").on_shortfall.value == "warn"
    with pytest.raises(ValidationError):
        BenchmarkConfig(on_shortfall="maybe")


@pytest.mark.parametrize(
    ("op", "key", "value", "choices"),
    [
        ("sft_mixture", "decontaminate", "trajectory_id", "trajectory, task_id, env_id"),
        ("benchmark_split", "on_shortfall", "warning", "fail, warn"),
    ],
)
def test_a_mistyped_choice_is_refused_at_launch_listing_the_choices(op, key, value, choices):
    from assets.selection import MixtureConfig
    from cli.launch import check_launch
    from pipeline.core.settings import settings

    assert MixtureConfig().decontaminate.value == "trajectory"  # the default rule
    (line,) = check_launch("envsim_main", {"ops": {op: {"config": {key: value}}}}, settings(), where="--config-json")
    assert (
        line == f"--config-json: config value '{value}' at ops.{op}.config.{key} is not one of {choices}: fix the value"
    )


@pytest.mark.parametrize("strict", [False, True])
def test_the_checks_take_strict_from_the_settings_value_not_the_environment(strict, monkeypatch):
    """``ENVSIM_STRICT`` reaches the quarantining checks through the ``run_policy`` resource the settings value
    builds (the entry point reads the environment once): ``relabel_is_deterministic``'s unset ``strict`` config
    and ``delta_roundtrip`` take it from there."""
    import inspect

    from assets.labeling import DeterminismConfig, delta_roundtrip, relabel_is_deterministic

    monkeypatch.setenv("ENVSIM_STRICT", "0" if strict else "1")  # the environment says otherwise
    assert build_definitions(Settings(strict=strict)).resources["run_policy"].strict is strict
    assert DeterminismConfig().strict is None
    for check in (delta_roundtrip, relabel_is_deterministic):
        assert "run_policy" in check.required_resource_keys
        assert "settings()" not in inspect.getsource(check.node_def.compute_fn.decorated_fn)


def test_every_asset_check_declaration_reads_in_lines_of_at_most_120_characters():
    """An asset check's description is written over short lines (the UI shows it joined), not as one long line."""
    from pathlib import Path

    long = [
        f"{path.name}:{n}"
        for path in sorted((Path(__file__).parents[2] / "assets").glob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if "@asset_check(" in line and len(line) > 120
    ]
    assert long == []


def test_the_training_job_evaluates_after_it_trains():
    """In the `training` job `simulator_eval_job` runs after `sft_training`, so `serve: {checkpoint: latest}`
    serves what the same run trained (on the GPU machine both started together and the evaluation failed with
    'no trained checkpoint … yet')."""
    import dagster as dg

    job = build_definitions(Settings(launcher="local")).get_job_def("training")
    upstream = job.asset_layer.asset_graph.get(dg.AssetKey("simulator_eval_job")).parent_keys
    assert dg.AssetKey("sft_training") in upstream
    assert {n.name for n in job.graph.nodes} == {"sft_training", "simulator_eval_job"}
