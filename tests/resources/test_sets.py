"""``resources_for(settings)``: one ``Profile`` built from the ``Settings`` value and passed down, so every
default a profile changes reaches the resources — and through them the domain dataclasses — with nothing
read from the process environment."""

import os

import pytest

from pipeline.core import profile
from pipeline.core.settings import VARIABLES, Settings
from pipeline.envs.bfcl_tasks import PROFILE_CATEGORIES
from pipeline.envs.builtin import PROFILE_SCENARIOS_PER_ENV
from pipeline.store.layout import DataLayout
from resources.sets import resources_for


@pytest.fixture
def empty_environment(monkeypatch):
    """No ``ENVSIM_*`` variable (nor ``SLURM_CONF``) in the process environment."""
    for name in list(os.environ):
        if name.startswith("ENVSIM_") or name in VARIABLES:
            monkeypatch.delenv(name)


def derived_defaults(current: Settings, root) -> dict:
    """Every setting a profile changes, as the resources of ``current`` hand it to the domain."""
    resources = resources_for(current)
    composition = resources["composition"]
    sources = resources["sources"].config(DataLayout.at(root))
    return {
        "composition": composition.composition(),
        "explore_call_budget": composition.explore_call_budget,
        "benchmark_on_shortfall": composition.on_shortfall,
        "bfcl_categories": tuple(f.category for f in sources.bfcl_files),
        "builtin_scenarios_per_env": sources.builtin_scenarios_per_env,
    }


def table_row(name: str) -> dict:
    """The same settings read from the profile table and the sources' tables."""
    chosen = profile.PROFILES[name]
    return {
        "composition": chosen.composition,
        "explore_call_budget": chosen.explore_call_budget,
        "benchmark_on_shortfall": chosen.benchmark_on_shortfall,
        "bfcl_categories": PROFILE_CATEGORIES[name],
        "builtin_scenarios_per_env": PROFILE_SCENARIOS_PER_ENV[name],
    }


@pytest.mark.parametrize("name", sorted(profile.PROFILES))
def test_every_profile_built_with_an_empty_environment_gives_its_table(name, empty_environment, tmp_path):
    assert derived_defaults(Settings(profile=name), tmp_path) == table_row(name)


@pytest.mark.parametrize("name", sorted(profile.PROFILES))
def test_the_environment_does_not_change_a_profile_built_from_a_value(name, monkeypatch, tmp_path):
    other = next(n for n in profile.PROFILES if n != name)
    monkeypatch.setenv("ENVSIM_PROFILE", other)  # the environment says otherwise: the value wins
    assert derived_defaults(Settings(profile=name), tmp_path) == table_row(name)


def test_the_profiles_differ_in_every_derived_default():
    """Each compared setting tells the profiles apart, so the comparison above cannot pass by accident."""
    rows = [table_row(name) for name in sorted(profile.PROFILES)]
    for key in rows[0]:
        if key != "benchmark_on_shortfall":  # ``warn`` in both; ``ENVSIM_STRICT`` changes it, not the profile
            assert len({repr(row[key]) for row in rows}) == len(rows), key


def test_every_source_table_has_a_row_for_every_profile():
    assert set(PROFILE_CATEGORIES) == set(PROFILE_SCENARIOS_PER_ENV) == set(profile.PROFILES)
