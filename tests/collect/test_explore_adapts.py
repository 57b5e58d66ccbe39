"""Exploration adapts to the corpus: targets no environment can approach are dropped and named, the budget scales
with the corpus, targets an environment can reach are still pursued, and a seed gives the same trajectories.

The corpus is our own (tests/support/handwritten_corpus.py)."""

import re
from pathlib import Path

import pyarrow.parquet as pq

from pipeline.collect.explore import Coverage, ExploreSettings
from pipeline.collect.run import collect_all
from pipeline.collect.sources import SourceConfig
from pipeline.core import profile
from pipeline.core.strata import Composition
from pipeline.envs.registry import sources_config
from pipeline.store.layout import DataLayout
from tests.support.handwritten_corpus import THREE, write_corpus


def _explore(tmp_path: Path, sandbox, envs: list[str], settings: ExploreSettings, name: str = "data"):
    cfg = sources_config(
        bfcl={"categories": [], "task_files": (), "replay": False},
        builtin={"enabled": False},
        envscaler=(write_corpus(tmp_path / "corpus", envs),),
    )
    lines: list[str] = []
    layout = DataLayout.at(tmp_path / name)
    result = collect_all(cfg, layout, sandbox, settings, log=lines.append)
    return result, layout, lines


OLD_BUDGET = 60_000  # what every corpus got before the budget scaled with it


def _finish(lines: list[str]) -> str:
    return [line for line in lines if line.startswith("exploration:")][-1]


def _shown(cov: Coverage, env: str, tool: str, calls: int, outcome: str, delta: int, args: int) -> None:
    for _ in range(calls):
        cov.add(env, tool, outcome, delta, args)


def test_the_budget_scales_with_the_corpus_and_an_explicit_one_wins():
    settings = ExploreSettings(calls_per_environment=2_000, max_call_budget=60_000)
    assert settings.budget(3) == 6_000 and settings.budget(50) == 60_000
    assert "calls_per_environment 2,000 × 3 environments" in settings.budget_text(3)
    # few environments, many scenarios or tools: the scenarios (tools) set the budget, with the value in force
    assert settings.budget(2, scenarios=60, tools=30) == 60 * settings.calls_per_scenario
    assert "calls_per_scenario 200 × 60 scenarios" in settings.budget_text(2, 60, 30)
    assert "`ops: trajectories: config: calls_per_scenario` (now 200)" in settings.budget_setting(2, 60, 30)
    assert settings.budget(2, scenarios=2, tools=30) == 30 * settings.calls_per_tool
    assert "capped at max_call_budget 60,000" in settings.budget_text(50)
    assert "extended while calls found something new" in settings.budget_text(2, 60, 30, spent=20_000)
    assert ExploreSettings(call_budget=700).budget(3) == 700
    assert "call_budget` (now 700)" in ExploreSettings(call_budget=700).budget_setting(3)
    assert ExploreSettings().max_call_budget == profile.RunPolicy().explore_call_budget


def test_a_target_is_unreachable_once_every_tool_plateaued_short_of_it():
    cov = Coverage(ExploreSettings(plateau_calls=20, min_envs=1))
    cov.explore_envs({"e": ["small", "rare"]})
    _shown(cov, "e", "small", 50, "success", 3, 1)
    _shown(cov, "e", "rare", 10, "success", 1, 1)
    assert "difficult" in cov.short() and not cov.unreachable()  # "rare" may still show more
    assert cov.tool_weights("e", ["small", "rare"])["rare"] >= 1.0  # ...so it keeps an untried tool's weight
    _shown(cov, "e", "rare", 20, "success", 1, 1)  # now it has plateaued too
    why = cov.unreachable()
    assert why["difficult"] == "unreachable, max |Δ| seen 3"
    assert "difficult (|Δ| 7–12): unreachable, max |Δ| seen 3" in cov.unreachable_lines()
    assert "difficult" not in cov.short() and "medium_3" in cov.short()  # |Δ| 3 is reachable: still pursued
    assert not cov.worth_exploring("other")  # an environment with no tool reaches nothing
    cov.add("e", "rare", "success", 9, 1)  # a plateaued tool that shows something new is judged again
    assert "difficult" in cov.short() and "difficult" not in cov.unreachable()


def test_a_cell_short_of_environments_is_unreachable_once_every_able_environment_contributed():
    cells_only = Composition(mixture_sizes={})
    cov = Coverage(ExploreSettings(plateau_calls=10, min_envs=10), cells_only)
    cov.explore_envs({"a": ["t"], "b": ["t"]})
    _shown(cov, "a", "t", 200, "success", 1, 1)
    _shown(cov, "b", "t", 200, "success", 2, 1)
    why = cov.unreachable()
    assert why["simple_1"].startswith("too few environments: 1 environment reaches it, the target wants 10")
    assert why["medium_4"] == "unreachable, max |Δ| seen 2"
    assert why["no_change_args0"] == "unreachable, argument counts seen: 1"  # no tool without arguments
    assert why["failure"] == "unreachable, no failure step seen"
    assert cov.satisfied()  # every target met or unreachable: exploration stops
    assert not cov.worth_exploring("a") and not cov.worth_exploring("b")
    # a Balance2 group still short of candidates keeps an environment that reaches it explored
    cov = Coverage(ExploreSettings(plateau_calls=10, min_envs=10), Composition((), {"simple": 100}))
    cov.explore_envs({"a": ["t"], "b": ["t"]})
    _shown(cov, "a", "t", 20, "success", 1, 1)
    _shown(cov, "b", "t", 20, "success", 0, 1)
    assert "b2:simple" in cov.short() and cov.worth_exploring("a") and not cov.worth_exploring("b")


def test_a_corpus_that_never_passes_delta_3_explores_in_a_fraction_of_the_old_budget(tmp_path, sandbox):
    """The issue's hand-written 3-environment corpus spent 60,000 calls on |Δ| 7–12 targets it can never reach."""
    result, _, lines = _explore(tmp_path, sandbox, THREE, ExploreSettings())
    cov = result.coverage
    assert cov.steps < OLD_BUDGET // 4
    finish = _finish(lines)
    for cell in ("medium_4 (|Δ| 4)", "medium_5 (|Δ| 5)", "medium_6 (|Δ| 6)", "difficult (|Δ| 7–12)"):
        assert f"{cell}: unreachable, max |Δ| seen 3" in finish, cell
    assert cov.stop_reason in finish
    assert cov.call_budget >= 3 * ExploreSettings().calls_per_environment
    assert cov.steps <= cov.call_budget  # no batch runs past the budget
    assert "failure (failure, |Δ| 0): too few environments: 3 environments reach it, the target wants 10" in finish
    assert {"medium_4", "medium_5", "medium_6", "difficult"} <= set(cov.unreachable())
    assert not {"medium_4", "medium_5", "medium_6", "difficult"} & set(cov.short())
    assert cov.cells["medium_3"] > 0  # |Δ| 3, which they reach, was explored


def test_a_rarely_chosen_tool_that_reaches_delta_8_is_still_pursued(tmp_path, sandbox):
    """The depot reaches |Δ| 7–8 only by its audit of "all": one tool of six, one section of twelve. A tool is
    judged only once it has plateaued, so the difficult cell stays a target the depot is explored for, while the
    |Δ| 4–6 cells, which no tool shows, are dropped."""
    settings = ExploreSettings(calls_per_environment=1_500, max_call_budget=4_000)
    result, _, lines = _explore(tmp_path, sandbox, ["notebook", "depot"], settings)
    cov = result.coverage
    assert cov.call_budget == settings.max_call_budget > settings.budget(2)  # grown while calls found something new
    audit = cov.shown[("envscaler/depot", "audit")]
    assert audit.calls < cov.steps / 6 and audit.max_delta >= 7  # rarely chosen, and it got there
    assert "envscaler/depot" in cov.cell_envs["difficult"]
    # pursued until the depot reached it (the budget grows while calls find something new): never judged beyond
    # reach by |Δ|, at most short of the 10 environments the target wants
    assert cov.cells["difficult"] > 0
    assert not cov.unreachable().get("difficult", "too few environments").startswith("unreachable")
    assert re.fullmatch(r"unreachable, \|Δ\| seen: 0–3, (7–8|7|8)", cov.unreachable()["medium_5"])
    assert f"medium_5 (|Δ| 5): {cov.unreachable()['medium_5']}" in _finish(lines)
    assert "difficult (|Δ| 7–12): unreachable" not in _finish(lines)


def test_same_seed_same_trajectories(tmp_path, sandbox):
    """Plateaus, unreachable targets and retired environments are decided from the steps alone."""
    settings = ExploreSettings(
        seed=3, calls_per_environment=700, plateau_calls=40, batch_episodes=20, max_call_budget=2_500
    )
    runs = [_explore(tmp_path / f"run{i}", sandbox, THREE, settings) for i in range(2)]
    (first, layout1, _), (second, layout2, _) = runs
    assert first.coverage.unreachable()  # the adaptive path was taken
    assert first.coverage.stop_reason == second.coverage.stop_reason
    assert pq.read_table(layout1.trajectories).equals(pq.read_table(layout2.trajectories))
    other, layout3, _ = _explore(
        tmp_path / "run3",
        sandbox,
        THREE,
        ExploreSettings(seed=4, calls_per_environment=700, plateau_calls=40, batch_episodes=20, max_call_budget=2_500),
    )
    assert not pq.read_table(layout1.trajectories).equals(pq.read_table(layout3.trajectories))


def test_a_reused_collection_reports_what_exploration_found(tmp_path, sandbox):
    """An unchanged collection is reused (pipeline.collect.reuse): its coverage still names the unreachable targets
    and why exploration stopped, as the asset metadata shows them."""
    settings = ExploreSettings(
        calls_per_environment=400,
        calls_per_scenario=0,
        calls_per_tool=0,
        plateau_calls=30,
        batch_episodes=20,
        max_call_budget=2_000,
    )
    first, _, _ = _explore(tmp_path, sandbox, THREE, settings)
    again, _, _ = _explore(tmp_path, sandbox, THREE, settings)
    assert again.reused and not first.reused
    assert again.coverage.stop_reason == first.coverage.stop_reason and first.coverage.stop_reason
    assert again.coverage.unreachable() == first.coverage.unreachable() != {}
    assert again.coverage.call_budget == first.coverage.call_budget == 2_000  # 400 × 3, grown while calls found more
