"""The synthetic corpus of the scale benchmark (benchmarks/synth_corpus.py): deterministic whatever the number of
worker processes, its stored Δs rebuild the states its hashes name, and trajectories beyond the templates repeat
one of their environment's templates under their own ids."""

import hashlib
import sys
from pathlib import Path

import duckdb
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import synth_corpus

from pipeline.store.reconstruct import verify_steps


def _digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*.parquet"))
    }


@pytest.fixture(scope="module")
def corpora(tmp_path_factory):
    """1,995 steps (the last trajectory cut short) in 10 environments of 4 templates each, parts of 60 trajectories:
    once on one process, once on two, once with another seed."""
    base = tmp_path_factory.mktemp("synth")
    patch = pytest.MonkeyPatch()
    patch.setattr(synth_corpus, "PART_TRAJECTORIES", 60)
    try:
        out = {}
        for name, workers, seed in (("one", 1, 0), ("two", 2, 0), ("other", 2, 1)):
            synth_corpus.generate(base / name, 1_995, envs=10, seed=seed, per_env=4, workers=workers)
            out[name] = base / name
        yield out
    finally:
        patch.undo()


def test_same_seed_gives_identical_files_whatever_the_workers(corpora):
    one, two = _digest(corpora["one"]), _digest(corpora["two"])
    assert len(one) == 8  # 200 trajectories in parts of 60: 4 step parts, 4 trajectories parts
    assert one == two
    assert _digest(corpora["other"]) != one
    assert not list(corpora["one"].glob(".synth-templates-*"))  # the templates are removed


def test_hashes_describe_the_states_the_deltas_rebuild(corpora):
    from pipeline.store.layout import DataLayout

    report = verify_steps(DataLayout.at(corpora["one"]))
    assert report.trajectories == 200
    assert report.problems == []


def test_templates_repeat_per_environment_under_new_ids(corpora):
    root = corpora["one"]
    con = duckdb.connect()
    steps = f"read_parquet('{root}/steps/*.parquet')"
    trajs = f"read_parquet('{root}/trajectories/*.parquet')"
    n, ids, envs, outcomes = con.execute(
        f"SELECT count(*), count(DISTINCT step_id), count(DISTINCT env_id), count(DISTINCT outcome) FROM {steps}"
    ).fetchone()
    assert (n, ids, envs, outcomes) == (1_995, 1_995, 10, 3)
    # 10 environments × 4 templates: 40 distinct initial states, none shared by two environments
    distinct, per_env_max = con.execute(
        f"SELECT count(DISTINCT initial_state_hash), max(e) FROM (SELECT initial_state_hash, count(DISTINCT env_id) e "
        f"FROM {trajs} GROUP BY 1)"
    ).fetchone()
    assert (distinct, per_env_max) == (40, 1)
    sizes = con.execute(f"SELECT min(strlen(initial_state_json)), max(strlen(initial_state_json)) FROM {trajs}")
    low, high = sizes.fetchone()
    assert 2 * 1024 <= low and high <= 21 * 1024
    # environments hold contiguous blocks of trajectories, as a collection writes them
    first = con.execute(f"SELECT env_id FROM {trajs} WHERE task_id = 'task0000000'").fetchone()[0]
    assert first == "synth/env0000"
