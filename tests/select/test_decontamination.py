"""Decontamination at the trajectory grain (docs/definitions.md §5), on a corpus shaped like a real
EnvScaler run: dozens of environments with two scenarios each, and many exploration episodes per
scenario that all carry the scenario's ``task_id``; every episode starts from the scenario's initial
state, so its first step repeats the (s_t, tool, arguments) of the scenario's other episodes.

The strata table is written directly (tests/support/strata_corpus.py).
"""

from __future__ import annotations

import json
import random

import pandas as pd
import pytest

from pipeline.core.decontamination import DECONTAMINATION, decontamination
from pipeline.core.strata import BALANCE2_GROUPS
from pipeline.quality.suites import overlap_suite
from pipeline.select import selection
from pipeline.select.selection import build_benchmark, build_mixture, strata_report
from tests.support.strata_corpus import corpus_layout  # a fixture
from tests.support.strata_corpus import sha as _hash
from tests.support.strata_corpus import step_row as _step


def _draw(rng: random.Random) -> tuple[str, int, int]:
    """(outcome, |Δ|, argument count): every benchmark cell and Balance2 group has candidates."""
    r = rng.random()
    if r < 0.17:
        return "failure", 0, rng.randint(0, 2)
    if r < 0.37:
        return "success", 0, rng.randint(0, 1)
    if r < 0.65:
        return "success", rng.randint(1, 2), rng.randint(1, 3)
    return "success", rng.randint(3, 12), rng.randint(1, 3)


def explored_corpus(
    envs: int = 50, scenarios: int = 2, episodes: int = 25, length: int = 8, seed: int = 0, many: int = 2
) -> pd.DataFrame:
    """Exploration episodes: ``episodes`` per scenario, all with the scenario's task_id; every episode's first
    step is one of three calls from the scenario's initial state (so its (s_t, tool, args) recurs). Most
    environments have ``scenarios`` scenarios, the first ``many`` five times as many."""
    rng = random.Random(seed)
    rows = []
    for e in range(envs):
        env = f"envscaler/env_{e:02d}"
        for s in range(scenarios * (5 if e < many else 1)):
            task = f"{env}:scenario_{s}"
            initial = _hash(task, "initial")
            for k in range(episodes):
                trajectory = f"{task}:explore-{k:03d}"
                for i in range(length):
                    outcome, delta, args = _draw(rng)
                    if i == 0:
                        call = rng.randint(0, 2)
                        outcome, delta, args = [("success", 0, 0), ("failure", 0, 1), ("success", 1, 1)][call]
                        state, tool, arguments = initial, f"tool_{call}", json.dumps({"n": call})
                    else:
                        state, tool, arguments = _hash(trajectory, i), f"tool_{rng.randint(0, 6)}", json.dumps({"x": i})
                    rows.append(_step(env, task, trajectory, i, outcome, delta, args, state, tool, arguments))
    return pd.DataFrame(rows)


def replayed_corpus(envs: int = 20, tasks: int = 30, length: int = 6, seed: int = 1) -> pd.DataFrame:
    """Replayed tasks (bfcl-like): one trajectory per task, the trajectory id derived from the task id."""
    rng = random.Random(seed)
    rows = []
    for e in range(envs):
        env = f"bfcl/Env{e:02d}"
        for t in range(tasks):
            task = f"multi_turn_base_{e * tasks + t}"
            for i in range(length):
                outcome, delta, args = _draw(rng)
                state = _hash(task, i) if i else _hash(env, "initial")  # every task of an env starts alike
                tool, arguments = (f"tool_{rng.randint(0, 6)}", json.dumps({"x": i})) if i else ("tool_0", "{}")
                if i == 0:
                    outcome, delta, args = "success", 0, 0
                rows.append(_step(env, task, f"{task}:replay", i, outcome, delta, args, state, tool, arguments))
    return pd.DataFrame(rows)


def _groups(mix) -> dict[str, dict]:
    return {row["stratum"]: row for row in mix.strata}


def test_explored_corpus_by_task_id_loses_the_mixture_by_trajectory_keeps_it(corpus_layout):
    """The real-data failure: the benchmark (maximising environments) touches almost every scenario, so
    decontaminating by task_id removes >90% of every Balance2 group's candidates and leaves few
    environments; the default (trajectory) fills every group from many environments, with no benchmark
    trajectory and no benchmark (env, s_t, tool, arguments) in the mixture."""
    corpus = explored_corpus()
    layout = corpus_layout(corpus)
    bench = build_benchmark(layout, seed=0)
    assert bench.samples == 400 and not bench.shortfalls
    b = pd.read_parquet(bench.path)
    scenarios = corpus["task_id"].nunique()
    assert b["task_id"].nunique() >= 0.8 * scenarios  # the benchmark touches almost every scenario

    by_task = build_mixture(
        layout, seed=0, decontaminate="task_id", benchmark_version=bench.version, make_current=False
    )
    for group, row in _groups(by_task).items():
        loss = next(d for d in by_task.decontamination if d["stratum"] == group)
        assert loss["removed_by_key"] > 0.9 * loss["before"], (group, loss)
        assert row["selected"] < 0.5 * BALANCE2_GROUPS[group] and row["environments"] <= 10, (group, row)

    mix = build_mixture(layout, seed=0, benchmark_version=bench.version)  # the default rule
    assert mix.spec["decontaminate"] == "trajectory"
    for group, row in _groups(mix).items():
        assert row["selected"] >= 0.9 * BALANCE2_GROUPS[group] and row["environments"] >= 10, (group, row)
    m = pd.read_parquet(mix.path)
    assert not set(m["trajectory_id"]) & set(b["trajectory_id"])
    assert not set(zip(m["env_id"], m["sample_hash"])) & set(zip(b["env_id"], b["sample_hash"]))
    assert overlap_suite(mix.path, bench.path, "trajectory").success
    # what each rule removed, per group: the episodes of the benchmark's trajectories, and the first steps of the
    # other episodes of a benchmark scenario that repeat a benchmark (env, s_t, tool, arguments)
    lost = {d["stratum"]: d for d in mix.decontamination}
    assert all(d["key"] == "trajectory_id" and d["identity"] == "(env, s_t, a_t)" for d in lost.values())
    assert sum(d["removed_by_hash"] for d in lost.values()) > 0 and sum(d["removed_by_key"] for d in lost.values()) > 0
    contaminating = corpus[
        corpus.set_index(["env_id", "sample_hash"]).index.isin(list(zip(b["env_id"], b["sample_hash"])))
        & ~corpus["trajectory_id"].isin(b["trajectory_id"])
    ]
    assert len(contaminating) > 0  # the corpus does hold such steps, and none reached the mixture
    assert not set(contaminating["step_id"]) & set(m["step_id"])
    table = strata_report(mix.strata, mix.tools, mix.decontamination)
    assert {"before_decontamination", "removed_by_trajectory_id", "removed_by_env_sample_hash"} <= set(table.columns)


def test_for_replayed_tasks_the_default_equals_task_id(corpus_layout):
    """One task = one trajectory: the default picks exactly the samples that by-task_id picks (only the
    version, which records the rule, differs)."""
    layout = corpus_layout(replayed_corpus())
    bench = build_benchmark(layout, seed=3)
    sizes = {"failure": 300, "no_change": 300, "simple": 600, "complex": 600}
    by_task = build_mixture(
        layout, sizes, seed=3, decontaminate="task_id", benchmark_version=bench.version, make_current=False
    )
    default = build_mixture(layout, sizes, seed=3, benchmark_version=bench.version, make_current=False)
    assert list(pd.read_parquet(default.path)["step_id"]) == list(pd.read_parquet(by_task.path)["step_id"])
    assert [d["removed_by_key"] for d in default.decontamination] == [
        d["removed_by_key"] for d in by_task.decontamination
    ]
    assert default.version != by_task.version  # the spec records the rule
    # the same rule twice is the same version: versions change only where the rule changes
    assert (
        build_mixture(
            layout, sizes, seed=3, decontaminate="task_id", benchmark_version=bench.version, make_current=False
        ).version
        == by_task.version
    )


@pytest.mark.parametrize("rule", ["task_id", "env_id"])
def test_stricter_options_remove_what_they_name(corpus_layout, rule):
    layout = corpus_layout(explored_corpus(envs=30, episodes=10))
    bench = build_benchmark(layout, [selection.Cell("few", "simple", 20, "success", 1, 2)], seed=1)
    mix = build_mixture(
        layout,
        {"failure": 50, "no_change": 50, "simple": 50, "complex": 50},
        seed=1,
        decontaminate=rule,
        benchmark_version=bench.version,
    )
    m, b = pd.read_parquet(mix.path), pd.read_parquet(bench.path)
    assert len(m) == 200 and not set(m[rule]) & set(b[rule]) and not set(m["sample_hash"]) & set(b["sample_hash"])
    assert overlap_suite(mix.path, bench.path, rule).success
    assert all(d["key"] == rule and d["identity"] == "(s_t, a_t) hash" for d in mix.decontamination)


def test_a_mistyped_rule_is_one_line_listing_the_choices(corpus_layout):
    layout = corpus_layout(replayed_corpus(envs=3, tasks=5))
    build_benchmark(layout, [selection.Cell("few", "simple", 2, "success", 1, 2)], seed=0)
    with pytest.raises(ValueError) as err:
        build_mixture(layout, {"simple": 2}, decontaminate="trajectory_id")
    assert str(err.value) == (
        "decontaminate must be one of trajectory, task_id, env_id (default trajectory), not 'trajectory_id'"
    )
    assert DECONTAMINATION.names() == ("trajectory", "task_id", "env_id") and decontamination("env_id").key == "env_id"


def test_a_benchmark_that_touches_every_trajectory_leaves_an_empty_mixture_with_its_fix(corpus_layout):
    """A corpus of few, long episodes: the benchmark takes a step of each, so nothing is left for the mixture;
    the error says how many trajectories the benchmark holds and how to fix it."""
    from pipeline.store.versions import EmptySelection

    layout = corpus_layout(explored_corpus(envs=3, scenarios=1, episodes=2, length=12, many=0))
    build_benchmark(layout, seed=0)
    with pytest.raises(EmptySelection) as err:
        build_mixture(layout, {"failure": 5, "no_change": 5, "simple": 5, "complex": 5})
    assert (
        "(the benchmark holds steps of 6 of the 6 trajectory_id values); fix: collect more episodes "
        "(ops: trajectories: config: call_budget) or choose a smaller benchmark (resources: composition: config: cells)"
        in str(err.value)
    )
