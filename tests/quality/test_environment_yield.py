"""The simulator-judged gate (issue 35, items 2, 3 and 5): seeded, stratified probe sets scored by the anchors
`oracle` and `no_change`; EnvScaler's pass_acc / not_fail_acc per environment with the executor's verdict beside
them, rows in DuckDB versioned by fingerprint, weights id and threshold; the accepted corpus exported in
EnvScaler's released layout, which the pipeline loads again."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import duckdb
import pytest
import yaml

from pipeline.collect.sources import SourceConfig, env_items
from pipeline.envs.config import EnvScalerCorpus
from pipeline.envs.registry import sources_config
from pipeline.evaluate.simulators import SimulatorSpec
from pipeline.quality.environment_report import environment_report
from pipeline.quality.environment_yield import (
    CALL_FAIL,
    CALL_PASS,
    CALL_WARNING,
    YieldSettings,
    call_status,
    environment_yield,
    gate,
    probe_picks,
)
from pipeline.select.samples import materialize_samples
from pipeline.select.stratify import input_fingerprint
from pipeline.store import catalog, warehouse
from tests.support.defect_corpus import BAD, GOOD, QUARANTINED, shared_defect_layout

ANCHORS = [SimulatorSpec(name="oracle", kind="oracle"), SimulatorSpec(name="no_change", kind="no_change")]


@pytest.fixture(scope="module")
def gated(tmp_path_factory, sandbox):
    layout, corpus = shared_defect_layout(tmp_path_factory, "yield")
    environment_report(layout)
    report, accepted = gate(layout, ANCHORS, [corpus], materialize_samples, YieldSettings(probes_per_env=8))
    return layout, corpus, report, accepted


def test_call_status_is_envscalers_pass_warning_fail():
    assert call_status({"fm": True, "cm": True}) == CALL_PASS
    assert call_status({"fm": False, "cm": True}) == call_status({"fm": True, "cm": False}) == CALL_WARNING
    assert call_status({"fm": False, "cm": False}) == CALL_FAIL


def test_probe_sets_are_seeded_balanced_and_fixed_in_size(gated):
    layout = gated[0]
    picks = probe_picks(layout, 8, seed=0)
    assert picks == probe_picks(layout, 8, seed=0)
    assert picks != probe_picks(layout, 8, seed=1)
    skipped = {step.split("/")[1] for step, _ in probe_picks(layout, 8, seed=0, skip=[QUARANTINED])}
    assert skipped == {step.split("/")[1] for step, _ in picks} - {QUARANTINED.split("/")[1]}
    per_env = Counter(step.split("/")[1] for step, _ in picks)
    assert set(per_env.values()) == {8} and len(per_env) == len(BAD) + len(GOOD)
    polarity = {env: Counter(p for s, p in picks if s.split("/")[1] == env) for env in per_env}
    # both kinds of call where the environment has both, alternating while both last (since issue 41 notes' calls
    # are drawn from related records and few are refused: its refusals may run out first); the ledger has only
    # refusals and errors
    negatives = (
        duckdb.connect()
        .execute(
            f"SELECT count(*) FROM read_parquet('{layout.strata}') WHERE env_id LIKE '%/notes' AND outcome <> 'success'"
        )
        .fetchone()[0]
    )
    assert 0 < negatives and polarity["notes"] == {"positive": 8 - min(4, negatives), "negative": min(4, negatives)}
    assert polarity["ledger"] == {"negative": 8}


def test_anchors_agree_with_the_executor_as_expected_and_the_verdicts_stay_apart(gated):
    _, _, report, _ = gated
    oracle, no_change = report.checkers

    def probed(checker):
        return [r for r in checker.rows if r["env_id"] != QUARANTINED]

    assert oracle.yield_ == 1.0 and all(r["pass_acc"] == 1.0 == r["not_fail_acc"] for r in probed(oracle))
    assert no_change.yield_ == 0.0 and all(r["pass_acc"] == 0.0 for r in probed(no_change))
    for row in probed(oracle) + probed(no_change):
        executor = "fail" if row["env_id"] in BAD else "pass"
        assert row["executor_verdict"] == executor  # the executor's verdict, whatever the checker said
        assert row["accepted"] == (row["checker_verdict"] == "pass" and executor == "pass")
        assert row["probes"] == 8 and row["answered"] == 8 and row["threshold"] == 0.85
    # the quarantined environment (non-deterministic labels) is not probed: a row that says why, no checker verdict
    for row in (r for r in oracle.rows + no_change.rows if r["env_id"] == QUARANTINED):
        assert row["probes"] == row["answered"] == 0 and row["checker_verdict"] is None and not row["accepted"]
        assert row["executor_verdict"] == "fail" and row["executor_problem"].startswith("non-deterministic")
    assert set(oracle.accepted) == set(GOOD) and no_change.accepted == []
    # no_change is right on the state of every call that changes nothing: its not_fail_acc shows it
    gallery = next(r for r in no_change.rows if r["env_id"] == "envscaler/gallery")
    assert gallery["not_fail_acc"] == 1.0 and gallery["cm"] == 1.0 and gallery["fm"] == 0.0


def test_yield_rows_land_in_duckdb_versioned(gated):
    layout = gated[0]
    con = duckdb.connect(str(layout.duckdb))
    try:
        warehouse.sync(con, layout)
        assert catalog.undocumented(con) == []
        rows = con.execute("""SELECT checker, count(*), any_value(corpus_fingerprint), any_value(threshold),
                                     count(*) FILTER (checker_verdict = 'pass'), any_value(checker_yield)
                              FROM env_yield GROUP BY 1 ORDER BY 1""").fetchall()
    finally:
        con.close()
    envs = len(BAD) + len(GOOD)
    assert rows == [
        ("no_change", envs, input_fingerprint(layout), 0.85, 0, 0.0),
        ("oracle", envs, input_fingerprint(layout), 0.85, envs - 1, 1.0),  # all but the quarantined one
    ]


def test_a_rerun_resumes_and_a_new_threshold_is_a_new_verdict(gated):
    layout = gated[0]
    again = environment_yield(layout, ANCHORS[:1], materialize_samples, YieldSettings(probes_per_env=8, threshold=1.0))
    [oracle] = again.checkers
    assert all(r["threshold"] == 1.0 and r["checker_verdict"] == "pass" for r in oracle.rows if r["probes"])
    with pytest.raises(ValueError, match="threshold"):
        YieldSettings(threshold=1.5)
    with pytest.raises(ValueError, match="unknown simulator kind"):
        environment_yield(layout, [SimulatorSpec(name="x", kind="nope")], materialize_samples)


def test_the_accepted_corpus_is_the_good_environments_in_envscalers_layout_and_loads(gated):
    _, corpus, _, accepted = gated
    assert accepted.environments == sorted(GOOD) and accepted.scenarios == 2 * len(GOOD)
    items = json.loads((accepted.directory / "envscaler" / "env_metadata.json").read_text())
    given = json.loads(Path(corpus.env_items).read_text())
    assert items == {env.split("/")[1]: given[env.split("/")[1]] for env in GOOD}  # each item as the corpus gave it
    card = json.loads((accepted.directory / "card.json").read_text())
    assert card["checker"] == "oracle" and card["threshold"] == 0.85 and card["yield"] == 1.0
    assert set(card["rejected"]) == set(BAD) and "always raises" in card["rejected"]["envscaler/ledger"]
    markdown = (accepted.directory / "CARD.md").read_text()
    assert "oracle" in markdown and "0.85" in markdown and "envscaler/kiosk" in markdown
    # the run config reads it back: the pipeline's own loader gives exactly the accepted environments
    run = yaml.safe_load(accepted.run_config.read_text())
    source = run["resources"]["sources"]["config"]
    assert source["builtin"] == {"enabled": False} and source["bfcl"] == {"categories": []}
    [entry] = source["envscaler"]
    cfg = sources_config(
        bfcl={"categories": [], "replay": False},
        builtin={"enabled": False},
        envscaler=[EnvScalerCorpus(Path(entry["env_items"]), Path(entry["scenarios"]), entry["prefix"])],
    )
    loaded, issues = env_items(cfg)
    assert sorted(i.qualified_id for i in loaded) == sorted(GOOD) and not issues


def test_an_unknown_gate_checker_is_named(gated):
    layout, corpus, _, _ = gated
    with pytest.raises(ValueError, match="gate_checker 'judge' is not one of the checkers: oracle"):
        gate(layout, ANCHORS[:1], [corpus], materialize_samples, YieldSettings(probes_per_env=8), gate_checker="judge")


def test_the_card_of_a_rerun_on_the_same_input_is_byte_identical(gated):
    """The card states the checker, threshold and yield, not the wall time (a measurement, kept in env_yield):
    the same seed and input give the same bytes."""
    layout, corpus, _, accepted = gated
    before = (accepted.directory / "card.json").read_bytes()
    assert b'"seconds"' not in before
    _, again = gate(layout, ANCHORS, [corpus], materialize_samples, YieldSettings(probes_per_env=8))
    assert (again.directory / "card.json").read_bytes() == before
    assert (again.directory / "CARD.md").read_bytes() == (accepted.directory / "CARD.md").read_bytes()
