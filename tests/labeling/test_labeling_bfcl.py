"""Ground-truth replay of all 800 bfcl multi-turn tasks, labeled in the sandbox."""

import json

import pyarrow.parquet as pq

from pipeline.core.canonical import state_hash
from pipeline.labeling.determinism import check_determinism
from pipeline.labeling.steps import label
from pipeline.quality.outcomes import check_outcomes
from pipeline.store import queries
from pipeline.store.reconstruct import materialize_states, verify_steps


def test_all_ground_truth_calls_are_labeled(default_layout):
    totals = queries.step_totals(default_layout)
    assert totals["steps"] == 4625
    assert totals["trajectories"] == 800
    table = queries.delta_by_outcome(default_layout)
    hist = {k: int(v) for k, v in table["total"].items() if k != "total"}
    # measured facts (shared/notes/bfcl.md): |Δ| 0:2288 1:1393 2:660 3:120 5:164
    assert hist == {0: 2288, 1: 1393, 2: 660, 3: 120, 5: 164}
    assert int(table.loc["total", "error"]) == 0
    # ground truth never errors; 16 calls report failure through false status fields
    assert int(table.loc["total", "failure"]) == 16


def test_bfcl_labels_are_plausible_under_the_default_rule(default_layout):
    """16 failures in 4,625 steps: the outcome check does not fire, and every step records the default rule."""
    report = check_outcomes(default_layout)
    assert report.ok and [(c.corpus, c.failures, c.rules) for c in report.corpora] == [("bfcl", 16, ["default"])]


def test_steps_table_columns(default_layout):
    part = sorted(default_layout.steps_dir.glob("part-*.parquet"))[0]
    row = pq.read_table(part).slice(0, 1).to_pylist()[0]
    for column in [
        "step_id",
        "trajectory_id",
        "tool",
        "arguments_json",
        "args_count",
        "raw_observation",
        "observation_json",
        "outcome",
        "delta",
        "delta_size",
        "state_before_hash",
        "state_after_hash",
        "code_ref",
    ]:
        assert column in row
    assert row["code_ref"]
    code = {c["code_ref"]: c for c in pq.read_table(default_layout.tool_code).to_pylist()}
    assert f"def {row['tool']}(" in code[row["code_ref"]]["code"]  # code(a_t) resolves to the method source


def test_every_delta_round_trips(default_layout):
    report = verify_steps(default_layout)
    assert report.ok, report.problems[:5]
    assert report.steps == 4625 and report.trajectories == 800


def test_full_states_reconstruct_and_match_hashes(default_layout):
    steps = materialize_states(default_layout, "bfcl/multi_turn_base_0/gt")
    assert [s["tool"] for s, _, _ in steps][:3] == ["cd", "mkdir", "mv"]
    step, before, after = steps[1]  # mkdir temp
    assert "temp" in after["GorillaFileSystem"]["root"]["contents"]["document"]["contents"]
    assert state_hash(after) == step["state_after_hash"]


def test_relabeling_sample_is_deterministic(default_layout, sandbox):
    report = check_determinism(default_layout, sandbox, sample_size=25, seed=7)
    assert report.ok, report.mismatches[:5]
    assert report.steps_compared > 50


def test_rerun_is_idempotent_and_resumes(default_layout, sandbox):
    parts = sorted(default_layout.steps_dir.glob("part-*.parquet"))
    before = {p.name: p.stat().st_mtime_ns for p in parts}
    again = label(default_layout, sandbox)
    assert again.parts_written == 0 and again.steps == 4625
    # an interrupted run: one part is missing -> only that one is recomputed
    parts[3].unlink()
    resumed = label(default_layout, sandbox)
    assert resumed.parts_written == 1 and resumed.parts_reused == len(parts) - 1
    after = {p.name: p.stat().st_mtime_ns for p in default_layout.steps_dir.glob("part-*.parquet")}
    assert set(after) == set(before)
    assert all(after[n] == before[n] for n in before if n != parts[3].name)
    assert queries.step_totals(default_layout)["steps"] == 4625


def test_verification_catches_a_corrupted_delta(default_layout, tmp_path):
    import shutil

    from pipeline.store.layout import DataLayout

    copy = DataLayout.at(tmp_path / "copy")
    shutil.copytree(default_layout.root, copy.root)
    part = sorted(copy.steps_dir.glob("part-*.parquet"))[0]
    table = pq.read_table(part)
    rows = table.to_pylist()
    victim = next(r for r in rows if r["delta_size"] > 0)
    victim["delta"][0]["after"] = json.dumps("tampered")
    pq.write_table(type(table).from_pylist(rows, schema=table.schema), part)
    report = verify_steps(copy)
    assert not report.ok
    assert victim["trajectory_id"] in report.problems[0]
