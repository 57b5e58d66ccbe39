"""Exploration: steering toward short strata, usable on every source (here: bfcl configs)."""

from pipeline.collect.explore import Coverage, ExploreSettings
from pipeline.collect.run import collect_all
from pipeline.collect.sources import SourceConfig
from pipeline.core import profile
from pipeline.core.strata import Cell, Composition
from pipeline.envs.bfcl_tasks import default_task_files
from pipeline.envs.registry import sources_config
from pipeline.labeling.steps import label
from pipeline.store import queries
from pipeline.store.layout import DataLayout
from pipeline.store.reconstruct import verify_steps


def test_tool_weights_favour_tools_that_hit_short_cells():
    cov = Coverage(ExploreSettings(min_envs=1))
    for _ in range(20):
        cov.add("e", "reader", "success", 0, 0)  # no_change_args0
        cov.add("e", "batcher", "success", 9, 2)  # difficult
    for _ in range(200):
        cov.add("e", "other", "success", 0, 0)  # fills no_change_args0 (target 80)
    weights = cov.tool_weights("e", ["reader", "batcher", "fresh"])
    assert weights["fresh"] == 1.0  # never tried: explored
    assert weights["batcher"] > weights["reader"]  # difficult is still short, no_change_args0 is not
    assert "no_change_args0" not in cov.short() and "difficult" in cov.short()


def test_environment_coverage_keeps_a_cell_short():
    cov = Coverage(ExploreSettings(min_envs=2))
    for _ in range(200):
        cov.add("a", "t", "success", 1, 1)
    assert "simple_1" in cov.short()  # enough candidates, one environment only
    assert "simple_1" not in cov.short("a")  # "a" already contributed: steering prefers other envs
    assert "simple_1" in cov.short("b")


def test_exploring_bfcl_configs(tmp_path, sandbox):
    layout = DataLayout.at(tmp_path)
    cfg = sources_config(bfcl={"categories": ["base"], "replay": False, "explore": True}, builtin={"enabled": False})
    result = collect_all(cfg, layout, sandbox, ExploreSettings(call_budget=300, batch_episodes=25, min_envs=1))
    assert result.report.by_strategy == {"explore": result.report.trajectories}
    assert 300 <= result.coverage.steps < 400
    label(layout, sandbox)
    totals = queries.step_totals(layout)
    assert totals["steps"] == result.coverage.steps  # re-execution reproduces every explored step
    table = queries.delta_by_outcome(layout)
    assert int(table.loc["total", "failure"]) > 0  # mutated arguments provoke rule failures
    assert verify_steps(layout).ok


def test_a_custom_composition_sets_the_targets_and_the_cells_counted():
    comp = Composition(
        (
            Cell("fail", "failure", 3, "failure", 0, 0),
            Cell("big", "difficult", 5, "success", 7, 12),
            Cell("any_success", "all", 4, "success", 0, 50),
        ),
        {"failure": 10},
    )
    cov = Coverage(ExploreSettings(min_envs=1), comp)
    assert cov.targets() == {"fail": 6, "big": 10, "any_success": 8, "b2:failure": 13}
    cov.add("e", "t", "success", 9, 0)
    cov.add("e", "t", "success", 1, 1)  # simple_1 in the default composition: not a cell here
    assert cov.cells == {"big": 1, "any_success": 2}  # overlapping cells: a candidate for both
    assert set(cov.short()) == {"fail", "big", "any_success", "b2:failure"}


def test_the_profile_composition_is_the_default_target(monkeypatch):
    """The default is the ``default`` profile's, whatever the environment says; another profile's
    composition is passed down (``resources.sets`` -> the ``composition`` resource)."""
    monkeypatch.setenv("ENVSIM_PROFILE", "small")
    assert Coverage(ExploreSettings()).targets()["b2:failure"] == int(1000 * 1.3)
    targets = Coverage(ExploreSettings(), profile.named("small").composition()).targets()
    assert targets["b2:failure"] == int(60 * 1.3) and targets["b2:complex"] == int(120 * 1.3)
    assert targets["difficult"] == 100


def test_a_custom_composition_steers_collection(tmp_path, sandbox):
    """Exploration stops as soon as the composition in force is covered — long before the budget a
    default composition would spend."""
    cfg = sources_config(bfcl={"categories": ["base"], "replay": False, "explore": True}, builtin={"enabled": False})
    comp = Composition((Cell("reads", "no_change", 5, "success", 0, 0),), {})
    result = collect_all(
        cfg,
        DataLayout.at(tmp_path),
        sandbox,
        ExploreSettings(call_budget=300, batch_episodes=2, min_envs=1),
        composition=comp,
    )
    cov = result.coverage
    assert cov.composition == comp and cov.satisfied()
    assert cov.cells["reads"] >= 10 and set(cov.cells) == {"reads"}
    assert cov.steps < 100


def test_a_search_that_found_nothing_new_for_progress_calls_is_plateaued_not_short_of_budget():
    cov = Coverage(ExploreSettings(min_envs=1, progress_calls=50, plateau_calls=1_000))
    cov.explore_envs({"e": ["write", "refused"]})
    for _ in range(300):
        cov.add("e", "write", "success", 2, 1)
        cov.add("e", "refused", "failure", 0, 1)
    assert cov.steps - cov.last_new >= 50 and cov.plateaued()
    verdicts = cov.judge(True, "600 calls", "`calls_per_scenario` (now 200)")
    difficult = verdicts["difficult"]
    assert difficult.startswith("plateaued: the last ") and "raise" not in difficult, difficult
    assert "never succeeded: e: refused" in difficult and difficult.endswith("max |Δ| seen 2"), difficult
    # still finding something new: the budget's verdict, with the setting to raise
    fresh = Coverage(ExploreSettings(min_envs=1, progress_calls=50, plateau_calls=1_000))
    fresh.explore_envs({"e": ["write"]})
    for d in range(1, 5):
        fresh.add("e", "write", "success", d, 1)
    assert "raise `calls_per_scenario`" in fresh.judge(True, "4 calls", "`calls_per_scenario` (now 200)")["difficult"]


def test_seen_counts_reference_and_replayed_steps():
    cov = Coverage(ExploreSettings(min_envs=1, plateau_calls=5))
    cov.explore_envs({"e": ["write"]})
    for _ in range(20):
        cov.add("e", "write", "success", 4, 1)
    assert cov.unreachable()["medium_5"] == "unreachable, max |Δ| seen 4"
    cov.observe({"outcome": "success", "delta_size": 5, "args_count": 1})  # a reference step reached |Δ| 5
    medium = cov.unreachable()["medium_5"]
    assert "unreachable" not in medium and "reference or replayed" in medium and "|Δ| seen: 4–5" in medium, medium
    assert cov.unreachable()["difficult"] == "unreachable, max |Δ| seen 5"
