"""``resources_for(settings)``: one profile file read from the ``Settings`` value, each of its sections the config
of the resource named after it, so every default a profile changes reaches the resources — and through them the
domain dataclasses — with nothing read from the process environment; a profile is one file, in this tree or not."""

import os

import pytest

from pipeline.core import profile
from pipeline.core.settings import VARIABLES, Settings, SettingsError
from pipeline.core.strata import Composition
from pipeline.store.layout import DataLayout
from resources.sets import resources_for

MEDIUM = """
[sources.bfcl]
categories = ["base", "miss_func"]

[sources.builtin]
scenarios_per_env = 40

[composition.mixture_sizes]
failure = 200
no_change = 200
simple = 400
complex = 400

[run_policy]
explore_call_budget = 8000
on_shortfall = "fail"
"""


@pytest.fixture
def empty_environment(monkeypatch):
    """No ``ENVSIM_*`` variable (nor ``SLURM_CONF``) in the process environment."""
    for name in list(os.environ):
        if name.startswith("ENVSIM_") or name in VARIABLES:
            monkeypatch.delenv(name)


def derived_defaults(current: Settings, root) -> dict:
    """Every setting a profile changes, as the resources of ``current`` hand it to the domain."""
    resources = resources_for(current)
    policy = resources["run_policy"]
    sources = resources["sources"].config(DataLayout.at(root))
    return {
        "composition": resources["composition"].composition(),
        "explore_call_budget": policy.explore_call_budget,
        "on_shortfall": policy.on_shortfall,
        "bfcl_categories": tuple(f.category for f in sources.sections["bfcl"].files()),
        "builtin_scenarios_per_env": sources.sections["builtin"].scenarios_per_env,
    }


EXPECTED = {
    "default": {
        "composition": Composition(),
        "explore_call_budget": 60_000,
        "on_shortfall": "warn",
        "bfcl_categories": ("base", "long_context", "miss_func", "miss_param"),
        "builtin_scenarios_per_env": 300,
    },
    "small": {
        "composition": Composition(mixture_sizes={"failure": 60, "no_change": 60, "simple": 120, "complex": 120}),
        "explore_call_budget": 1_500,
        "on_shortfall": "warn",
        "bfcl_categories": ("base",),
        "builtin_scenarios_per_env": 12,
    },
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_profile_built_with_an_empty_environment_gives_its_file(name, empty_environment, tmp_path):
    assert derived_defaults(Settings(profile=name), tmp_path) == EXPECTED[name]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_environment_does_not_change_a_profile_built_from_a_value(name, monkeypatch, tmp_path):
    monkeypatch.setenv("ENVSIM_PROFILE", "small" if name == "default" else "default")  # the value wins
    assert derived_defaults(Settings(profile=name), tmp_path) == EXPECTED[name]


def test_the_profiles_are_the_files_of_the_tree():
    assert profile.available() == ("default", "small")
    assert profile.named("default").sections == {}  # the default changes nothing: the resources' own defaults


def test_a_profile_is_one_file_outside_the_tree(tmp_path):
    """A ``medium`` profile added as one file changes every default it names, in every section."""
    (tmp_path / "medium.toml").write_text(MEDIUM)
    current = Settings(profile=str(tmp_path / "medium.toml"))
    assert profile.named(current.profile).name == "medium"
    assert derived_defaults(current, tmp_path) == {
        "composition": Composition(mixture_sizes={"failure": 200, "no_change": 200, "simple": 400, "complex": 400}),
        "explore_call_budget": 8_000,
        "on_shortfall": "fail",
        "bfcl_categories": ("base", "miss_func"),
        "builtin_scenarios_per_env": 40,
    }


def test_a_bad_profile_is_one_line_naming_its_file_and_key(tmp_path):
    with pytest.raises(SettingsError, match="ENVSIM_PROFILE must be a profile .default, small. or the path"):
        Settings.from_env({"ENVSIM_PROFILE": "medium"})
    bad = tmp_path / "bad.toml"
    for text, says in [
        ("[sources.builtin]\nscenarios = 3\n", "sources.builtin.scenarios: Extra inputs are not permitted"),
        ("[run_policy]\non_shortfall = 'maybe'\n", "run_policy.on_shortfall: Input should be 'warn' or 'fail'"),
        ("[composition]\nstrict = true\n", "composition.strict: Extra inputs are not permitted"),
        ("[exploration]\nx = 1\n", "unknown section exploration; sections: sources, composition, run_policy"),
    ]:
        bad.write_text(text)
        with pytest.raises(profile.ProfileError) as err:
            resources_for(Settings(profile=str(bad)))
        assert says in str(err.value) and str(bad) in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_envsim_strict_makes_the_policy_strict_over_the_profile(tmp_path):
    policy = resources_for(Settings(profile="small", strict=True))["run_policy"]
    assert (policy.strict, policy.on_shortfall, policy.explore_call_budget) == (True, "fail", 1_500)
