"""A real model in the quality gate's loop (issue 35, item 4; slow, CPU): the embedded SmolLM2-135M-Instruct,
served with `llamafactory-cli api`, is a checker of `environment_yield` beside the anchors `oracle` and
`no_change` on the planted-defect corpus (tests/support/defect_corpus.py). Its rows land in DuckDB under its
weights id with its tokens and wall time; its yield is what it is (the untrained model answers no probe in the
protocol: 0), reported as measured (docs/evaluation.md "The corpus quality gate"); the executor's verdicts
beside it are the planted ones whatever it answered."""

from __future__ import annotations

import pytest

from pipeline.evaluate.simulators import SimulatorSpec, simulator_spec
from pipeline.quality.environment_report import environment_report
from pipeline.quality.environment_yield import YieldSettings, gate
from pipeline.select.samples import materialize_samples
from pipeline.store.duck import open_data_root
from pipeline.training import base_models, checkpoints
from pipeline.training.bench_model import resolve_model
from pipeline.training.launchers import find_llamafactory
from pipeline.training.serve import ServeSpec, serve
from tests.e2e.test_llamafactory_e2e import train_python  # module fixture
from tests.e2e.test_real_model import converted_once
from tests.support.defect_corpus import BAD, GOOD, QUARANTINED, shared_defect_layout

pytestmark = pytest.mark.slow
MODEL = base_models.DEFAULT_MODEL
PROBES = 1


def test_smollm2_is_a_checker_of_the_gate_end_to_end(tmp_path_factory, sandbox, train_python):
    layout, corpus = shared_defect_layout(tmp_path_factory, "gate-real-model")
    environment_report(layout)
    python, cli = find_llamafactory(train_python)
    converted_once(tmp_path_factory, python, layout.root)  # converted once for the run; resolved by name below
    path, manifest, _origin, template = resolve_model(MODEL, layout.root, python, None)
    wid = checkpoints.weights_id(path, manifest)
    name = checkpoints.default_served_name(path, wid, manifest)
    spec = ServeSpec(
        model_name_or_path=str(path),
        template=template,
        served_name=name,
        backend="huggingface",
        llamafactory_cli=cli,
        llamafactory_python=python,
        infer_dtype="float32",
    )
    with serve(spec, layout.jobs / "gate-checker", print) as endpoint:
        smol = simulator_spec(
            name=name,
            kind="openai",
            model=name,
            base_url=endpoint.base_url,
            api_key_env="",
            max_tokens=32,
            concurrency=1,
            timeout_s=600,
            max_retries=1,
            weights_id=wid,
        )
        anchors = [SimulatorSpec(name="oracle", kind="oracle"), SimulatorSpec(name="no_change", kind="no_change")]
        report, accepted = gate(
            layout,
            [*anchors, smol],
            [corpus],
            materialize_samples,
            YieldSettings(probes_per_env=PROBES),
            gate_checker=name,
        )
    envs = len(BAD) + len(GOOD)
    by_checker = {c.spec.results_name: c for c in report.checkers}
    model = by_checker[smol.results_name]
    print(f"SmolLM2-135M-Instruct as checker: {model.summary()}")
    probed = [r for r in model.rows if r["env_id"] != QUARANTINED]  # the quarantined one is not probed: a row of 0
    assert len(model.rows) == envs and all(r["answered"] == r["probes"] == PROBES for r in probed)
    assert [r["probes"] for r in model.rows if r["env_id"] == QUARANTINED] == [0]
    assert all(r["weights_id"] == wid and wid.startswith("sha256-") for r in model.rows)
    assert sum(r["prompt_tokens"] for r in model.rows) > 0 and sum(r["completion_tokens"] for r in model.rows) > 0
    assert model.seconds > 0 and 0.0 <= model.yield_ <= 1.0
    for row in model.rows:  # the executor's verdict is the planted one, whatever the model said
        assert row["executor_verdict"] == ("fail" if row["env_id"] in BAD else "pass")
        assert row["accepted"] == (row["checker_verdict"] == "pass" and row["executor_verdict"] == "pass")
    assert set(accepted.environments) == set(model.accepted) <= set(GOOD)
    assert accepted.card["checker"] == smol.results_name and accepted.card["weights_id"] == wid
    with open_data_root(layout.root, read_only=False) as con:
        rows = dict(con.execute("SELECT checker, count(*) FROM env_yield GROUP BY 1").fetchall())
        tokens = con.execute("SELECT sum(prompt_tokens) FROM env_yield WHERE weights_id = ?", [wid]).fetchone()[0]
    assert rows == {"oracle": envs, "no_change": envs, smol.results_name: envs} and tokens > 0
