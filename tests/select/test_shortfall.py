"""A corpus that cannot fill the composition still yields both products: the benchmark holds what the
corpus allows, each missing cell is named with what the corpus reaches and the fix, and the mixture is
built from the rest; ``on_shortfall: fail`` keeps the strict behaviour.

The corpora are shaped like the third-party ones users bring (tests/support/strata_corpus.py): a few
environments whose calls change at most 3 fields, refusing with failures (or with none labeled)."""

from __future__ import annotations

import json
import random

import pandas as pd
import pytest

from pipeline.select.selection import ShortfallError, build_benchmark, build_mixture
from pipeline.select.shortfall import SHORTFALL_FIX, shortfall_report
from pipeline.store.versions import BENCHMARK, MIXTURE, SplitStore
from tests.support.strata_corpus import corpus_layout, sha, step_row  # a fixture


def small_corpus(envs: int = 5, failures: bool = True, seed: int = 0, failure_rate: float = 0.2) -> pd.DataFrame:
    """ACEBench-like: ``envs`` environments, 3 scenarios each, 20 episodes of 6 calls; |Δ| ≤ 3; refusals
    labeled failure (or, ``failures=False``, a corpus whose refusals no rule recognised: no failure)."""
    rng = random.Random(seed)
    rows = []
    for e in range(envs):
        env = f"envscaler/phone_{e}"
        for s in range(3):
            task = f"{env}:scenario_{s}"
            for k in range(20):
                trajectory = f"{task}:explore-{k:02d}"
                for i in range(6):
                    r = rng.random()
                    outcome, delta = (
                        ("failure", 0) if r < failure_rate and failures else ("success", rng.choice([0, 0, 1, 2, 3]))
                    )
                    args = rng.randint(0, 2)
                    rows.append(
                        step_row(
                            env,
                            task,
                            trajectory,
                            i,
                            outcome,
                            delta,
                            args,
                            sha(trajectory, i),
                            f"tool_{rng.randint(0, 7)}",
                            json.dumps({"a": args}),
                        )
                    )
    return pd.DataFrame(rows)


def test_a_small_corpus_yields_a_benchmark_naming_each_missing_cell_and_a_mixture(corpus_layout):
    layout = corpus_layout(small_corpus())
    bench = build_benchmark(layout, seed=0)  # the default: warn
    lines = bench.shortfall_lines()
    assert {line.split(" (")[0] for line in lines} == {"medium_4", "medium_5", "medium_6", "difficult"}
    assert "difficult (|Δ| 7–12): 0 of 50, max |Δ| in the corpus 3" in lines
    assert "medium_4 (|Δ| 4): 0 of 50, max |Δ| in the corpus 3" in lines
    assert bench.samples == 400 - 200
    assert SplitStore(layout, BENCHMARK).current() == bench.version
    manifest = SplitStore(layout, BENCHMARK).manifest(bench.version)
    assert manifest["reach"]["difficult"] == "max |Δ| in the corpus 3"
    report = shortfall_report(manifest)
    assert report[0].startswith(f"SHORTFALL: benchmark {bench.version} holds 200 of 400 samples: 4 cell(s)")
    assert "  difficult (|Δ| 7–12): 0 of 50, max |Δ| in the corpus 3" in report
    assert report[-1] == f"  fix: {SHORTFALL_FIX}"
    assert "resources: composition: config: cells:" in SHORTFALL_FIX and "larger state changes" in SHORTFALL_FIX
    # the mixture is built from the rest, with every group (the corpus has no |Δ| ≥ 3 beyond 3: complex is |Δ| 3)
    mix = build_mixture(layout, {"failure": 50, "no_change": 50, "simple": 50, "complex": 50}, seed=0)
    assert mix.samples == 200 and SplitStore(layout, MIXTURE).current() == mix.version
    assert (
        shortfall_report(SplitStore(layout, MIXTURE).manifest(mix.version)) == []
    )  # a full mixture: nothing to report


def test_a_corpus_without_failure_labels_names_the_failure_cell(corpus_layout):
    layout = corpus_layout(small_corpus(failures=False))
    bench = build_benchmark(layout, seed=0)
    assert "failure (failure, |Δ| 0): 0 of 20, no failure step in the corpus" in bench.shortfall_lines()
    mix = build_mixture(layout, {"failure": 10, "no_change": 50, "simple": 50, "complex": 50}, seed=0)
    assert {r["stratum"]: r["selected"] for r in mix.strata} == {
        "failure": 0,
        "no_change": 50,
        "simple": 50,
        "complex": 50,
    }


def test_on_shortfall_fail_keeps_the_strict_behaviour(corpus_layout):
    layout = corpus_layout(small_corpus())
    with pytest.raises(ShortfallError) as err:
        build_benchmark(layout, seed=0, on_shortfall="fail")
    message = str(err.value)
    assert "difficult (|Δ| 7–12): 0 of 50, max |Δ| in the corpus 3" in message and f"fix: {SHORTFALL_FIX}" in message
    assert "\n" not in message
    assert SplitStore(layout, BENCHMARK).current() is None  # no version
    with pytest.raises(ValueError, match=r"^on_shortfall must be one of warn, fail, not 'warning'$"):
        build_benchmark(layout, seed=0, on_shortfall="warning")


def test_a_partly_filled_cell_says_how_many_candidates_and_environments(corpus_layout):
    layout = corpus_layout(small_corpus(envs=2, failure_rate=0.01))
    bench = build_benchmark(layout, seed=0)
    failure = next(line for line in bench.shortfall_lines() if line.startswith("failure"))
    available = next(s["available"] for s in bench.shortfalls if s["stratum"] == "failure")
    assert 0 < available < 20
    assert (
        failure
        == f"failure (failure, |Δ| 0): {available} of 20, {available} distinct candidates in the corpus, from 2 "
        "environments"
    )


def test_a_cell_no_step_has_the_argument_count_of_says_so(corpus_layout):
    corpus = small_corpus()
    layout = corpus_layout(corpus[corpus["args_count"] > 0])  # every call takes arguments
    bench = build_benchmark(layout, seed=0)
    assert (
        "no_change_args0 (|Δ| 0, 0 arguments): 0 of 40, no success step with 0 arguments in the corpus"
        in bench.shortfall_lines()
    )


def test_a_mixture_short_of_its_sizes_is_named_with_what_decontamination_removed_and_the_fix(corpus_layout):
    from pipeline.select.shortfall import mixture_fix

    layout = corpus_layout(small_corpus())
    bench = build_benchmark(layout, seed=0)
    mix = build_mixture(layout, {"failure": 50, "no_change": 50, "simple": 50, "complex": 5000}, seed=0)
    manifest = SplitStore(layout, MIXTURE).manifest(mix.version)
    report = shortfall_report(manifest)
    assert report[0] == f"SHORTFALL: sft_mixture {mix.version} holds {mix.samples} of 5150 samples: 1 group(s) short"
    (line,) = [r for r in report if r.startswith("  complex: ")]
    assert line.startswith(f"  complex: {mix.samples - 150} of 5000 (") and f"against {bench.version})" in line
    assert report[-1] == f"  fix: {mixture_fix()}" and "mixture_sizes" in mixture_fix()


def test_the_summary_says_which_of_three_kinds_each_short_cell_is_with_the_setting_in_force(corpus_layout):
    """Exploration's verdicts (recorded beside the trajectories) reach the benchmark's and the mixture's shortfall
    lines: unreachable, not reached within the budget (with the setting to raise and its value in force), too few
    environments — never one for another, and never a hardcoded budget."""
    import json

    layout = corpus_layout(small_corpus())
    setting = "`ops: trajectories: config: calls_per_scenario` (now 200), or set `call_budget`"
    verdicts = {
        "medium_6": "not reached within the budget (12,000 calls: calls_per_scenario 200 × 60 scenarios): still "
        f"finding something new: e/shop: exchange; raise {setting}",
        "difficult": "unreachable, max |Δ| seen 5",
        "b2:complex": f"not reached within the budget (12,000 calls): raise {setting}",
    }
    record = {"coverage": {"verdicts": verdicts, "budget_text": "12,000 calls", "budget_setting": setting}}
    layout.trajectories.parent.mkdir(parents=True, exist_ok=True)
    layout.trajectories.with_name(layout.trajectories.stem + ".collection.json").write_text(json.dumps(record))
    bench = build_benchmark(layout, seed=0)
    report = shortfall_report(SplitStore(layout, BENCHMARK).manifest(bench.version))
    medium_6 = next(line for line in report if line.startswith("  medium_6 "))
    difficult = next(line for line in report if line.startswith("  difficult "))
    assert "not reached within the budget" in medium_6 and "unreachable" not in medium_6
    assert difficult.endswith("unreachable, max |Δ| seen 5") and "budget" not in difficult
    assert "1 not reached within the exploration budget" in report[0] and "the corpus cannot fill" in report[0]
    assert f"  fix (cells not reached within the budget): explore longer, raise {setting}" in report
    mix = build_mixture(layout, {"failure": 50, "no_change": 50, "simple": 50, "complex": 5000}, seed=0)
    report = shortfall_report(SplitStore(layout, MIXTURE).manifest(mix.version))
    assert any(line.startswith("  complex: ") and "not reached within the budget" in line for line in report)
    assert report[-1].startswith(f"  fix: add environments or scenarios (raise {setting} to explore longer)")
    assert "3,000" not in "\n".join(report)


def test_a_plateaued_search_is_its_own_kind_and_no_fix_says_raise():
    from pipeline.select.shortfall import kind_of, shortfall_report

    verdict = "plateaued: the last 2,000 calls found nothing new, so more calls of the same search would not help"
    assert kind_of(f"1 distinct candidates in the corpus; {verdict}") == "plateaued"
    manifest = {
        "kind": "benchmark",
        "version": "bench-x",
        "samples": 1,
        "spec": {
            "composition": [
                {
                    "name": "medium_5",
                    "group": "medium",
                    "quota": 50,
                    "outcome": "success",
                    "delta_min": 5,
                    "delta_max": 5,
                }
            ]
        },
        "shortfalls": [{"stratum": "medium_5", "selected": 1, "requested": 50, "available": 1}],
        "reach": {"medium_5": f"1 distinct candidates in the corpus, from 1 environment; {verdict}"},
        "exploration": {"setting": "`calls_per_scenario` (now 200)"},
    }
    report = shortfall_report(manifest)
    assert "1 exploration plateaued before reaching" in report[0], report
    assert not any("raise" in line for line in report), report
    mixture = {
        "kind": "sft_mixture",
        "version": "mix-x",
        "samples": 5,
        "strata": [{"requested": 10}],
        "shortfalls": [{"stratum": "complex", "selected": 5, "requested": 10, "available": 5}],
        "exploration": {"setting": "`calls_per_scenario` (now 200)", "verdicts": {"b2:complex": verdict}},
    }
    lines = shortfall_report(mixture)
    assert (
        lines[-1].startswith("  fix: add environments or scenarios (exploration plateaued") and "raise" not in lines[-1]
    )
