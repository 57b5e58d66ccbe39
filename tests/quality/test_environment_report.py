"""The executor's report card per environment (issue 35, item 1): on a corpus with planted defects, each defect
is named on the right environment and tool, the planted-bad environments fail and the good ones pass; the rows
are in DuckDB, commented, and the run summary names the worst environments with their main problem."""

from __future__ import annotations

import dataclasses

import duckdb
import pyarrow.parquet as pq
import pytest

from pipeline.quality.environment_report import (
    DETERMINISTIC,
    FAIL,
    NONDETERMINISTIC,
    PASS,
    Thresholds,
    environment_report,
    summary_lines,
)
from pipeline.store import catalog, warehouse
from tests.support.defect_corpus import BAD, GOOD, shared_defect_layout


@pytest.fixture(scope="module")
def gated(tmp_path_factory, sandbox):
    layout, corpus = shared_defect_layout(tmp_path_factory, "defects")
    report = environment_report(layout)
    return layout, corpus, report


def _envs(report):
    return {e["env_id"]: e for e in report.envs}


def _tools(report):
    return {(t["env_id"], t["tool"]): t for t in report.tools}


def test_every_planted_defect_is_named_on_its_environment_and_tool(gated):
    _, _, report = gated
    envs, tools = _envs(report), _tools(report)
    assert set(envs) == set(BAD) | set(GOOD)
    # a tool that always raises: its error steps, exception and an example call, on that tool only
    raising = tools[("envscaler/ledger", "post_entry")]
    assert raising["steps"] > 0 and raising["error_steps"] == raising["steps"], raising
    assert raising["top_exception"] == "KeyError: 'main'" and raising["example_call"].startswith("post_entry(")
    assert raising["example_step"].startswith("envscaler/ledger/")
    raising_tools = {("envscaler/ledger", "post_entry"), ("envscaler/kiosk", "note_sale")}
    others = [t for key, t in tools.items() if key not in raising_tools]
    assert others and all(t["error_steps"] == 0 for t in others)
    assert "post_entry (" in envs["envscaler/ledger"]["error_tools"]
    assert envs["envscaler/ledger"]["main_problem"].startswith("tool post_entry always raises (KeyError")
    # the schema declares an argument the code rejects, and the code requires one the schema omits
    sell, refund = tools[("envscaler/kiosk", "sell")], tools[("envscaler/kiosk", "refund")]
    assert sell["schema_only_args"] == "note" and sell["code_only_args"] is None and not sell["in_catalog"]
    assert refund["code_only_args"] == "reason" and refund["schema_only_args"] is None
    # the same defect only the calls show: note_sale(**fields) hands its schema's `memo` to a method without it
    note = tools[("envscaler/kiosk", "note_sale")]
    assert note["in_catalog"] and note["steps"] > 0 and note["error_steps"] == note["steps"]
    assert note["schema_only_args"] == "memo" and note["top_exception"].startswith("TypeError: ")
    assert "unexpected keyword argument 'memo'" in note["top_exception"]
    assert envs["envscaler/kiosk"]["mismatches"] == 3
    assert envs["envscaler/kiosk"]["main_problem"].startswith("schema/code mismatch")
    assert all(e["mismatches"] == 0 for env, e in envs.items() if env != "envscaler/kiosk")
    # an environment no call can change
    assert envs["envscaler/gallery"]["max_delta"] == 0 and envs["envscaler/gallery"]["steps"] > 0
    assert envs["envscaler/gallery"]["main_problem"].startswith("cannot change state")
    # a non-deterministic one, with the determinism check's reason
    tagger = envs["envscaler/tagger"]
    assert tagger["determinism"] == NONDETERMINISTIC and "differ on re-execution" in tagger["quarantine_reason"]
    assert tagger["main_problem"].startswith("non-deterministic")
    assert all(envs[g]["determinism"] == DETERMINISTIC for g in GOOD)


def test_the_gate_fails_the_planted_bad_environments_and_passes_the_good_ones(gated):
    _, _, report = gated
    envs = _envs(report)
    assert {e for e in envs if envs[e]["verdict"] == FAIL} == set(BAD), {e: envs[e]["problems"] for e in envs}
    assert all(envs[g]["verdict"] == PASS and envs[g]["main_problem"] is None for g in GOOD)
    for env, (_tool, said) in BAD.items():
        assert said in envs[env]["main_problem"], (env, envs[env]["main_problem"])


def test_strata_reached_scenarios_and_tools_are_reported(gated):
    _, _, report = gated
    envs = _envs(report)
    notes = envs["envscaler/notes"]
    assert notes["scenarios"] == 2 and notes["tools"] == 3 and 1 <= notes["tools_used"] <= 3
    assert notes["max_delta"] >= 1 and "simple_1" in notes["cells"].split(", ")
    assert notes["cells_reached"] == len(notes["cells"].split(", "))
    assert "simple_1" not in (envs["envscaler/gallery"]["cells"] or "")  # |Δ| 0 only: no simple cell
    assert all(e["success_steps"] + e["failure_steps"] + e["error_steps"] == e["steps"] for e in envs.values())
    assert envs["envscaler/kiosk"]["tools"] == 3  # of 5: sell and refund were dropped from the catalog at load


def test_thresholds_decide_the_verdict_not_the_report(gated):
    layout = gated[0]
    relaxed = dataclasses.replace(
        Thresholds(),
        allow_nondeterministic=True,
        max_mismatches=5,
        require_state_change=False,
        broken_tool_share=1.1,
        max_error_share=1.0,
    )
    again = _envs(environment_report(layout, relaxed, write=False))
    assert all(e["verdict"] == PASS for e in again.values()), {e: v["problems"] for e, v in again.items()}
    assert again["envscaler/kiosk"]["mismatches"] == 3  # still reported, no longer failing
    strict = dataclasses.replace(Thresholds(), max_error_share=0.0)
    assert _envs(environment_report(layout, strict, write=False))["envscaler/ledger"]["verdict"] == FAIL


@pytest.mark.parametrize(
    "state",
    ['{"when":{"$repr":"<object>"}}', '{"jobs":{"$type":"queue.Queue","items":[],"maxsize":0}}'],
    ids=["repr", "by-type"],
)
def test_state_problems_name_values_that_are_not_plain_json(tmp_path, state):
    """A state holding a value that is not JSON (an object's repr, a queue) is reported with the environment."""
    from pipeline.store.layout import DataLayout
    from pipeline.store.parquet_io import write_table
    from pipeline.store.schema import TRAJECTORIES

    layout = DataLayout.at(tmp_path)
    row = {name: None for name in TRAJECTORIES.names}
    row.update(
        trajectory_id="t",
        source="envscaler",
        env_id="envscaler/odd",
        task_id="x",
        fingerprint="f",
        initial_state_json=state,
        initial_state_hash="h",
        num_actions=0,
    )
    layout.trajectories_dir.mkdir(parents=True)
    write_table(layout.trajectories, [row], TRAJECTORIES)
    report = environment_report(layout, write=False)
    [odd] = report.envs
    assert odd["env_id"] == "envscaler/odd" and "not plain JSON" in odd["state_problems"]
    # no call of it executed: not judged (a catalog environment exploration never reached is no defect)
    assert odd["verdict"] == "untested" and odd["main_problem"].startswith("no steps") and report.failing == []
    assert odd["determinism"] == "untested"  # nothing of it was re-executed: no claim of determinism
    assert report.headline().endswith("untested (no steps of their own, determinism 'untested'): envscaler/odd")


def test_the_rows_are_in_duckdb_commented_and_the_summary_names_the_worst(gated):
    layout, _, report = gated
    assert pq.read_table(layout.env_quality).num_rows == len(report.envs)
    con = duckdb.connect(str(layout.duckdb))
    try:
        warehouse.sync(con, layout)
        assert catalog.undocumented(con) == []
        failing = dict(con.execute("SELECT env_id, main_problem FROM env_quality WHERE verdict = 'fail'").fetchall())
        assert set(failing) == set(BAD)
        heavy = con.execute("SELECT env_id, tool FROM env_tool_quality WHERE error_share = 1 ORDER BY ALL").fetchall()
        assert heavy == [("envscaler/kiosk", "note_sale"), ("envscaler/ledger", "post_entry")]
    finally:
        con.close()
    lines = summary_lines(layout)
    assert len(lines) == 1 + len(BAD) and "3 of 7 environments pass" in lines[0]
    for env in BAD:
        assert any(line.startswith(f"  {env}: ") for line in lines[1:]), lines


def test_the_gate_leaves_the_failing_environments_out_of_the_splits_and_one_setting_lets_them_in(gated):
    """By default every step of each environment the executor fails is excluded from the splits by stratification
    with its reason; the summary names each with its reason and the setting that lets them back in; the report card
    judges the same steps either way (its own gate is not its input); ``gate_splits: false`` lets them in (issue 52,
    item 6)."""
    from pipeline.labeling.quarantine import failed_checks, input_fingerprint
    from pipeline.quality.environment_report import GATE_SETTING, gate_lines, gate_splits
    from pipeline.select.stratify import stratify

    layout, _, report = gated
    before = input_fingerprint(layout)
    try:
        assert gate_splits(layout, report) == sorted(BAD)
        stratify(layout)
        strata = pq.read_table(layout.strata).to_pylist()
        for row in strata:
            if row["env_id"] in BAD:
                assert row["excluded"] and row["excluded_reason"], row
        gated_reasons = {r["env_id"] for r in strata if (r["excluded_reason"] or "").startswith("quality gate: ")}
        assert gated_reasons == set(BAD) - {"envscaler/tagger"}  # its non-deterministic reason came first
        assert any(not r["excluded"] for r in strata if r["env_id"] in GOOD)
        assert input_fingerprint(layout) != before  # a new input: new split versions
        lines = gate_lines(layout)
        assert lines[0].startswith(f"Left out of the splits by the quality gate: {len(BAD)} environment(s)")
        assert f"`{GATE_SETTING}` lets them back in" in lines[0]
        for env, (_tool, said) in BAD.items():
            assert any(line.startswith(f"  {env}: ") and said in line for line in lines[1:]), (env, lines)
        assert [doc["check"] for doc in failed_checks(layout)] == ["relabel_is_deterministic"]  # not a failed check
        again = environment_report(layout, write=False)
        assert again.fingerprint == report.fingerprint and again.envs == report.envs
    finally:
        assert gate_splits(layout, report, enabled=False) == []
        stratify(layout)
    assert not layout.quality_gate.exists() and gate_lines(layout) == []
    assert input_fingerprint(layout) == before
    assert all(
        not (r["excluded_reason"] or "").startswith("quality gate") for r in pq.read_table(layout.strata).to_pylist()
    )


def test_an_env_item_the_loader_refuses_keeps_its_corpus_prefix():
    """An env item that does not load is not in the catalog; its row carries its corpus's prefix as every loaded
    environment's does (the prefix of the file the issue names, else the only one configured, else EnvScaler's)."""
    from pipeline.quality.environment_report import _unloaded_env

    assert _unloaded_env("bank", "envs.json:bank", {}) == "envscaler/bank"
    assert _unloaded_env("bank", "more.json[2]:bank", {"more.json": "mine", "envs.json": "other"}) == "mine/bank"
    assert _unloaded_env("bank", "x.json:bank", {"envs.json": "mine"}) == "mine/bank"
    assert _unloaded_env("mine/bank", "envs.json:bank", {"envs.json": "mine"}) == "mine/bank"
