"""The quality gate as a user runs it (issue 35, slow): `./forge run -c run.yaml` on a corpus with planted defects
prints the worst environments with their main problem, puts the gate's rows in DuckDB and exports the accepted
corpus; `./forge run -c <accepted>/run.yaml` — the clean-corpus run — loads exactly the good environments and
every one of them passes."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from pipeline.store.duck import open_data_root
from pipeline.store.layout import DataLayout
from tests.support.defect_corpus import BAD, GOOD, write_defect_corpus
from tests.support.user_corpora import run_config

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def forge_run(where: Path, config: Path) -> tuple[subprocess.CompletedProcess, DataLayout]:
    """``./forge run -c config`` with a data root and Dagster home of its own under ``where``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENVSIM_")}
    env.update(DAGSTER_HOME=str(where / "home"), ENVSIM_DATA_ROOT=str(where / "data"))
    (where / "home").mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        ["./forge", "run", "-c", str(config)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=1800,
    )
    return proc, DataLayout.at(where / "data")


def test_a_run_gates_the_corpus_and_the_accepted_corpus_reruns_clean(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump(run_config(*write_defect_corpus(tmp_path / "corpus"))))
    proc, layout = forge_run(tmp_path / "first", config)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    worst = out[out.index("Environment quality") :].splitlines()[1 : 1 + len(BAD)]
    assert sorted(line.split(":")[0].strip() for line in worst) == sorted(BAD), worst
    with open_data_root(layout.root) as con:
        verdicts = dict(con.execute("SELECT env_id, verdict FROM env_quality").fetchall())
        checkers = {r[0] for r in con.execute("SELECT DISTINCT checker FROM env_yield").fetchall()}
    assert {e for e, v in verdicts.items() if v == "fail"} == set(BAD) and checkers == {"oracle", "no_change"}
    accepted = layout.accepted_corpus
    assert json.loads((accepted / "card.json").read_text())["accepted"] == sorted(GOOD)

    again, clean = forge_run(tmp_path / "second", accepted / "run.yaml")  # the clean-corpus run, as exported
    assert again.returncode == 0, (again.stdout + again.stderr)[-4000:]
    with open_data_root(clean.root) as con:
        rows = dict(con.execute("SELECT env_id, verdict FROM env_quality").fetchall())
    assert rows == {env: "pass" for env in GOOD}, rows
