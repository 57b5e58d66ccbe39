"""Benign generated code runs (issues 40 item 6 and 53), run as a user runs a corpus: ``./forge run -c run.yaml`` on
an EnvScaler-format corpus of the patterns LLM-written environments use (tests/support/benign_corpus.py: 44 patterns
that need nothing of the sandbox — threads, asyncio, file copies and modes, sqlite WAL and JSON functions, /etc
lookups, sysconf, time zones from the system's zoneinfo, numpy and pandas among them —, 3 that store a sandbox
directory name and 1 that starts a process).

- none of the 44 is quarantined, every one was built and labeled (it has steps), and every label — the initial state
  hash, and per step the observation text, the canonical return value and the s'_t hash — equals what plain Python
  gives for the same calls (the same classes run in a fresh interpreter without any sandbox, ``PYTHONHASHSEED=0`` as
  in the sandbox);
- the process pattern is not quarantined either, and each of its calls is a ``sandbox_refused`` step naming
  ``clone`` (never a training label: the strata exclude it);
- the 3 directory patterns (``os.getcwd()``, ``tempfile.gettempdir()``, a ``mkstemp`` path) are not quarantined
  either: the sandbox's per-trajectory directory names are deterministic (``/tmp/work/t-<hash of the trajectory
  id>``), and no label holds a host path (the data root, the checkout, the host's temp folder).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest
import yaml

from pipeline.labeling.quarantine import excluded_files
from pipeline.store.layout import DataLayout
from pipeline.store.trajectories import iter_trajectory_rows
from tests.support.benign_corpus import DIR_PATTERNS, PATTERNS, REFUSED_PATTERNS, write_corpus
from tests.support.user_corpora import forge_run, run_config

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
#: a small exploration, 60 calls per pattern (each pattern still gets trajectories of its own): the 1 MB-state
#: environment ships its state on every changing call; a fixed budget, since a corpus-scaled one (300 per tool) grows
#: while a pattern that reaches a large |Δ| (a ``classify`` of every file) still finds candidates of the deep cells,
#: up to the profile's 60,000 calls
ALL_PATTERNS = {**PATTERNS, **DIR_PATTERNS, **REFUSED_PATTERNS}
EXPLORE = {
    "trajectories": {"config": {"call_budget": 60 * len(ALL_PATTERNS), "plateau_calls": 30, "batch_episodes": 20}}
}


def _env_id(name: str) -> str:
    return f"envscaler/benign_{name}"


@pytest.fixture(scope="module")
def benign_run(tmp_path_factory) -> tuple[subprocess.CompletedProcess, DataLayout]:
    tmp = tmp_path_factory.mktemp("benign")
    env_file, scen_file = write_corpus(tmp / "corpus", ALL_PATTERNS)
    return forge_run(tmp, run_config(env_file, scen_file, **EXPLORE), timeout=2400)


def _quarantined(layout: DataLayout) -> dict[str, str]:
    """env id -> one reason, for every environment in a findings file (``nondeterministic-*``/``quarantine-*``) that
    applies to the current steps (the quality gate's verdicts are not the sandbox's: a read-only pattern that cannot
    change state is gated, as it should be)."""
    files = excluded_files(layout, gate=False)
    if not files:
        return {}
    rows = duckdb.execute("SELECT env_id, min(reason) FROM read_parquet(?) GROUP BY 1", [files]).fetchall()
    return dict(rows)


def _steps_by_env(layout: DataLayout) -> dict[str, int]:
    rows = duckdb.execute("SELECT env_id, count(*) FROM read_parquet(?) GROUP BY 1", [layout.step_parts()]).fetchall()
    return dict(rows)


def test_no_benign_pattern_is_quarantined_and_every_one_is_labeled(benign_run):
    proc, layout = benign_run
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    quarantined = {e: r for e, r in _quarantined(layout).items() if e in {_env_id(n) for n in PATTERNS}}
    assert not quarantined, quarantined
    steps = _steps_by_env(layout)
    unlabeled = sorted(n for n in PATTERNS if steps.get(_env_id(n), 0) == 0)
    assert not unlabeled, (unlabeled, out[-3000:])


def test_no_label_holds_a_memory_address_and_process_machinery_is_state_by_type(benign_run):
    _, layout = benign_run
    initial = {
        r["env_id"]: r["initial_state_json"]
        for r in iter_trajectory_rows(layout, columns=["env_id", "initial_state_json"])
        if r["env_id"].startswith("envscaler/benign_")
    }
    logger = '"logger":{"$type":"logging.Logger","name":"order_desk","level":20}'
    assert logger in initial[_env_id("logging_basicconfig")]
    assert '"lock":{"$type":"threading.Lock","locked":false}' in initial[_env_id("threading_locks")]
    assert '"pending":{"$type":"queue.Queue","maxsize":10,"items":' in initial[_env_id("queue_jobs")]
    assert '"stream":{"$repr":"<generator object Numbering._numbers>"}' in initial[_env_id("generators")]
    with_address = [e for e, text in initial.items() if " at 0x" in text]
    with_address += [
        r[0]
        for r in duckdb.execute(
            "SELECT DISTINCT env_id FROM read_parquet(?) WHERE raw_observation LIKE '% at 0x%' "
            "OR observation_json LIKE '% at 0x%' OR CAST(delta AS VARCHAR) LIKE '% at 0x%'",
            [layout.step_parts()],
        ).fetchall()
    ]
    assert not with_address, with_address


def _oracle_input(layout: DataLayout) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(the calls of every trajectory of the 26 patterns, for plain Python; what the pipeline labeled them)."""
    by_id = {_env_id(n): PATTERNS[n] for n in PATTERNS}
    trajectories = {
        r["trajectory_id"]: r
        for r in iter_trajectory_rows(
            layout, columns=["trajectory_id", "env_id", "init_config_json", "initial_state_hash"]
        )
        if r["env_id"] in by_id
    }
    steps: dict[str, list[dict[str, Any]]] = {}
    rows = duckdb.execute(
        "SELECT trajectory_id, step_index, tool, arguments_json, raw_observation, observation_json, "
        "observation_truncated, state_after_hash FROM read_parquet(?) ORDER BY trajectory_id, step_index",
        [layout.step_parts()],
    ).fetchall()
    for tid, index, tool, args, obs, value, truncated, after in rows:
        if tid in trajectories:
            steps.setdefault(tid, []).append(
                {"index": index, "tool": tool, "arguments": json.loads(args), "observation": obs, "value": value}
                | {"truncated": truncated, "state_after_hash": after}
            )
    calls, labeled = [], []
    for tid in sorted(steps):
        traj, its = trajectories[tid], steps[tid]
        assert [s["index"] for s in its] == list(range(len(its))), f"{tid}: steps missing"
        cls, code, _ = by_id[traj["env_id"]]
        calls.append(
            {
                "class_name": cls,
                "code": code,
                "init_config": json.loads(traj["init_config_json"]),
                "calls": [[s["tool"], s["arguments"]] for s in its],
            }
        )
        labeled.append({"trajectory_id": tid, "initial_state_hash": traj["initial_state_hash"], "steps": its})
    return calls, labeled


def test_benign_labels_equal_plain_pythons(benign_run):
    _, layout = benign_run
    calls, labeled = _oracle_input(layout)
    assert {c["class_name"] for c in calls} == {cls for cls, _, _ in PATTERNS.values()}
    proc = subprocess.run(
        [sys.executable, "-m", "tests.support.benign_corpus"],
        cwd=ROOT,
        input=json.dumps(calls),
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    plain = json.loads(proc.stdout)
    differences = []
    compared = 0
    for ours, theirs in zip(labeled, plain, strict=True):
        tid = ours["trajectory_id"]
        if ours["initial_state_hash"] != theirs["initial_state_hash"]:
            differences.append(f"{tid}: initial state")
        for step, expected in zip(ours["steps"], theirs["steps"], strict=True):
            compared += 1
            where = f"{tid} step {step['index']} {step['tool']}({step['arguments']})"
            observation = expected["observation"]
            if step["truncated"]:
                observation = observation[: len(step["observation"])]
            if step["observation"] != observation:
                differences.append(f"{where}: observation {step['observation'][:200]!r} != {observation[:200]!r}")
            if step["value"] is not None and step["value"] != expected["value_json"]:
                differences.append(f"{where}: return value {step['value'][:200]!r} != {expected['value_json']!r:.200}")
            if step["state_after_hash"] != expected["state_after_hash"]:
                differences.append(f"{where}: s'_t")
    assert compared > 10 * len(PATTERNS)
    assert not differences, f"{len(differences)} of {compared} steps differ:\n" + "\n".join(differences[:20])


def test_what_the_sandbox_refuses_is_a_sandbox_refused_step_naming_the_syscall_and_never_a_quarantine(benign_run):
    proc, layout = benign_run
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    refused = [_env_id(n) for n in REFUSED_PATTERNS]
    assert not {e: r for e, r in _quarantined(layout).items() if e in refused}
    rows = duckdb.execute(
        "SELECT outcome, error_type, error_message FROM read_parquet(?) WHERE list_contains(?, env_id)",
        [layout.step_parts(), refused],
    ).fetchall()
    assert rows, "the process pattern was not labeled"
    assert {(outcome, kind) for outcome, kind, _ in rows} == {("sandbox_refused", "SandboxRefused")}, rows[:5]
    assert all(message.startswith("the sandbox refused syscall 'clone'") for _, _, message in rows), rows[:5]
    excluded = duckdb.execute(
        "SELECT DISTINCT excluded, excluded_reason FROM read_parquet(?) WHERE list_contains(?, env_id)",
        [str(layout.strata), refused],
    ).fetchall()
    assert excluded == [(True, "sandbox_refused")], excluded
    outcomes = duckdb.execute(
        "SELECT DISTINCT outcome FROM read_parquet(?) WHERE NOT list_contains(?, env_id)",
        [layout.step_parts(), refused],
    ).fetchall()
    assert ("sandbox_refused",) not in outcomes  # nothing else of the benign corpus is refused


def test_patterns_that_store_sandbox_directory_names_are_not_quarantined_and_show_no_host_path(benign_run):
    proc, layout = benign_run
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    steps = _steps_by_env(layout)
    assert all(steps.get(_env_id(n), 0) > 0 for n in DIR_PATTERNS), steps
    quarantined = {e: r for e, r in _quarantined(layout).items() if e in {_env_id(n) for n in DIR_PATTERNS}}
    assert not quarantined, quarantined
    dir_envs = [_env_id(n) for n in DIR_PATTERNS]
    initial = " ".join(
        r["initial_state_json"]
        for r in iter_trajectory_rows(layout, columns=["env_id", "initial_state_json"])
        if r["env_id"] in dir_envs
    )
    assert "/tmp/work/t-" in initial, initial[:2000]
    labels = initial + " ".join(
        str(row)
        for row in duckdb.execute(
            "SELECT raw_observation, observation_json, CAST(delta AS VARCHAR) FROM read_parquet(?) "
            "WHERE list_contains(?, env_id)",
            [layout.step_parts(), dir_envs],
        ).fetchall()
    )
    host_paths = [str(layout.root), str(ROOT), "envsim-sandbox-"]
    assert not [p for p in host_paths if p in labels], [p for p in host_paths if p in labels]
