"""Issue 40, "Done when": the hostile families run as a user runs a corpus — ``./forge run -c run.yaml`` on an
EnvScaler-format corpus (tests/support/attack_corpus/: every case of every family, F1 "child reaches its worker or a
sibling" to F6 "poisoned names", the issue's chmod, /proc, thread/page-cache, deep-directory and hidden-mode cases
among them) with the two innocent victims — and the victims' labels are byte-identical to a run of the victims alone.

The oracle: both runs explore with the same seed, so a victim trajectory has the same id in both and takes the same
actions until exploration (steered by the whole corpus's strata) branches; every step of that shared prefix (each
action, observation, return value, outcome, Δ, |Δ| and the hashes of s_t and s'_t — all but the measured call time)
must be the same, the victims must not be quarantined, and no label of any environment may hold a host path (the data
root, the checkout).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from pipeline.labeling.quarantine import excluded_files
from pipeline.store.layout import DataLayout
from tests.support.attack_corpus import load_cases, write_corpus
from tests.support.user_corpora import forge_run, run_config

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
#: exploration sized by environments only, ``calls_per_environment`` × environments (30 calls each: every tool of every
#: attacker is called, each victim runs three episodes in both runs, over 20 of its steps taking the same actions), not
#: by the defaults ``calls_per_scenario`` (200) × scenarios and ``calls_per_tool`` (300) × tools, grown 2,000 calls at
#: a time (``progress_calls``; here 10) while calls find something new: with those the run with the attackers made
#: 6,269 calls (this: 1,350) and the run of the victims alone 4,400 (this: 190), for the same assertions
EXPLORE = {
    "trajectories": {
        "config": {
            "calls_per_environment": 30,
            "calls_per_scenario": 1,
            "calls_per_tool": 1,
            "progress_calls": 10,
            "plateau_calls": 10,
            "batch_episodes": 10,
        }
    }
}
HOSTILE = load_cases()
#: what a run measures rather than labels
MEASURED = {"call_seconds"}


def _forge_run(root: Path, cases: list) -> tuple[subprocess.CompletedProcess, DataLayout]:
    env_file, scen_file = write_corpus(root / "corpus", cases)
    return forge_run(root, run_config(env_file, scen_file, **EXPLORE), timeout=1500)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    alone = _forge_run(tmp_path_factory.mktemp("victims-alone"), [])
    mixed = _forge_run(tmp_path_factory.mktemp("victims-with-attackers"), HOSTILE)
    return alone, mixed


def _steps(layout: DataLayout) -> list[dict]:
    return pa.concat_tables([pq.read_table(p) for p in layout.step_parts()]).to_pylist()


def _victim_trajectories(layout: DataLayout) -> dict[tuple[str, str], list[dict]]:
    """(env id, trajectory id) -> the victims' steps in order, every column but the measured ones."""
    out: dict[tuple[str, str], list[dict]] = {}
    for r in sorted(_steps(layout), key=lambda r: (r["trajectory_id"], r["step_index"])):
        if "victim_" in r["env_id"]:
            labels = {k: v for k, v in r.items() if k not in MEASURED}
            out.setdefault((r["env_id"], r["trajectory_id"]), []).append(labels)
    return out


def _same_actions_prefix(a: list[dict], b: list[dict]) -> int:
    """How many first steps take the same actions (exploration is steered by the whole corpus, so a trajectory may
    branch where the corpus differs; up to there the environment sees the same calls from the same state)."""
    n = 0
    while n < min(len(a), len(b)) and (a[n]["tool"], a[n]["arguments_json"]) == (b[n]["tool"], b[n]["arguments_json"]):
        n += 1
    return n


def test_the_attackers_ran_and_the_victims_label_as_they_do_alone(runs):
    (alone, alone_layout), (mixed, mixed_layout) = runs
    assert alone.returncode == 0, (alone.stdout + alone.stderr)[-4000:]
    assert mixed.returncode == 0, (mixed.stdout + mixed.stderr)[-4000:]
    attacked = len({r["env_id"] for r in _steps(mixed_layout) if "victim_" not in r["env_id"]})
    assert attacked >= len(HOSTILE) // 2, f"only {attacked} of {len(HOSTILE)} attackers were labeled"
    reference, observed = _victim_trajectories(alone_layout), _victim_trajectories(mixed_layout)
    compared: dict[str, int] = {}
    for key in sorted(set(reference) & set(observed)):
        same = _same_actions_prefix(reference[key], observed[key])
        for a, b in zip(reference[key][:same], observed[key][:same]):
            assert a == b, f"victim step {key} #{a['step_index']} differs: " + ", ".join(c for c in a if a[c] != b[c])
        compared[key[0]] = compared.get(key[0], 0) + same
    assert set(compared) == {"envscaler/victim_ledger", "envscaler/victim_counter"}, compared
    assert min(compared.values()) >= 20, f"too few victim steps took the same actions in both runs: {compared}"


def _left_out(layout: DataLayout, gate: bool) -> dict[str, str]:
    """env id -> why its steps were left out: the sandbox's quarantine, and with ``gate`` the quality gate's."""
    return {r["env_id"]: r["reason"] for f in excluded_files(layout, gate=gate) for r in pq.read_table(f).to_pylist()}


def test_no_victim_is_quarantined_and_no_label_holds_a_host_path(runs):
    """No victim is quarantined beside the attackers, and the quality gate judges the victims as it does when they
    run alone (victim_counter's ``sell`` never has the stock: it cannot change state, and the gate says so)."""
    (_, alone_layout), (mixed, layout) = runs
    quarantined = _left_out(layout, gate=False)
    assert not {e: why for e, why in quarantined.items() if "victim_" in e}, quarantined
    gated = {e for e in _left_out(layout, gate=True) if "victim_" in e}
    assert gated == {e for e in _left_out(alone_layout, gate=True) if "victim_" in e}, gated
    text = repr(_steps(layout))
    for host in (str(layout.root), str(ROOT)):
        assert host not in text, f"a label holds the host path {host}"
