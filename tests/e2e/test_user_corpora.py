"""Corpora users bring, run as a user runs them (``./forge run -c run.yaml``, the default profile): both products
come out right (issue 32's "Done when").

- a real-format corpus of 40 generated environments with 2 scenarios each: a 400/400 benchmark and a Balance2
  mixture whose every group is at least 90% full and drawn from at least 10 environments, with no benchmark
  trajectory and no benchmark (env, s_t, tool, arguments) in it;
- an ACEBench-style corpus (5 environments, refusals as ``{"status": False, ...}``, |Δ| ≤ 3): exit 0, its refusals
  labelled ``failure``, a benchmark and a mixture, the shortfall named with its fix;
- a 3-environment corpus: exploration stops in seconds, naming the unreachable targets (tests/e2e/test_kill_resume.py,
  whose uninterrupted reference run it is).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import duckdb
import pytest
import yaml

from pipeline.core.strata import BALANCE2_GROUPS
from pipeline.store.layout import DataLayout
from pipeline.store.versions import BENCHMARK, MIXTURE, SplitStore
from tests.support.user_corpora import run_config, write_generated_corpus, write_status_corpus

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def forge_run(tmp_path: Path, env_file: Path, scen_file: Path) -> tuple[subprocess.CompletedProcess, DataLayout]:
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump(run_config(env_file, scen_file)))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENVSIM_")}
    env.update(DAGSTER_HOME=str(tmp_path / "home"), ENVSIM_DATA_ROOT=str(tmp_path / "data"))
    proc = subprocess.run(
        ["./forge", "run", "-c", str(config)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200
    )
    return proc, DataLayout.at(tmp_path / "data")


def current_samples(layout: DataLayout, kind: str) -> str:
    store = SplitStore(layout, kind)
    version = store.current()
    assert version, f"no current {kind} version"
    return str(store.samples(version))


def test_a_generated_corpus_of_dozens_of_environments_gives_both_products_whole(tmp_path):
    env_file, scen_file = write_generated_corpus(tmp_path / "corpus", n_envs=40, scenarios_per_env=2)
    proc, layout = forge_run(tmp_path, env_file, scen_file)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    con = duckdb.connect()
    bench, mix = current_samples(layout, BENCHMARK), current_samples(layout, MIXTURE)
    assert con.execute(f"SELECT count(*) FROM read_parquet('{bench}')").fetchone()[0] == 400
    groups = dict(
        (g, (n, e))
        for g, n, e in con.execute(
            f"SELECT stratum, count(*), count(DISTINCT env_id) FROM read_parquet('{mix}') GROUP BY 1"
        ).fetchall()
    )
    for group, size in BALANCE2_GROUPS.items():
        n, envs = groups.get(group, (0, 0))
        assert n >= 0.9 * size and envs >= 10, (group, n, size, envs)
    shared_trajectories = con.execute(
        f"SELECT count(*) FROM read_parquet('{mix}') WHERE trajectory_id IN "
        f"(SELECT trajectory_id FROM read_parquet('{bench}'))"
    ).fetchone()[0]
    shared_samples = con.execute(
        f"SELECT count(*) FROM read_parquet('{mix}') m JOIN read_parquet('{bench}') b "
        f"USING (env_id, state_before_hash, tool, arguments_json)"
    ).fetchone()[0]
    assert shared_trajectories == 0 and shared_samples == 0


def test_an_acebench_style_corpus_is_labelled_in_its_own_convention_and_yields_both_products(tmp_path):
    env_file, scen_file = write_status_corpus(tmp_path / "corpus")
    proc, layout = forge_run(tmp_path, env_file, scen_file)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    con = duckdb.connect()
    steps = f"read_parquet({[str(p) for p in layout.step_parts()]!r})"
    refusals = dict(
        con.execute(
            f"SELECT outcome, count(*) FROM {steps} WHERE raw_observation LIKE '%''status'': False%' GROUP BY 1"
        ).fetchall()
    )
    assert refusals.get("failure", 0) > 100 and set(refusals) == {"failure"}, refusals
    reminder = con.execute(
        f"SELECT count(*) FROM {steps} WHERE raw_observation LIKE '%Reminder ID does not exist%' "
        "AND outcome = 'failure'"
    ).fetchone()[0]
    assert reminder > 0
    bench, mix = current_samples(layout, BENCHMARK), current_samples(layout, MIXTURE)
    bench_cells = dict(con.execute(f"SELECT stratum, count(*) FROM read_parquet('{bench}') GROUP BY 1").fetchall())
    assert bench_cells.get("failure") == 20 and "difficult" not in bench_cells, bench_cells
    assert con.execute(f"SELECT count(*) FROM read_parquet('{mix}')").fetchone()[0] > 0
    assert con.execute(f"SELECT count(*) FROM read_parquet('{mix}') WHERE stratum = 'failure'").fetchone()[0] > 0
    # the shortfall is named, with the reachable maximum and the fix
    tail = out[out.rfind("benchmark") :] if "benchmark" in out else out
    assert re.search(r"difficult.*max \|Δ\|.*3", out), tail[-3000:]
    assert "add environments" in out, tail[-3000:]
