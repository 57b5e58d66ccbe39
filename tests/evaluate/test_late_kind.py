"""A simulator kind registered in code after ``assets.evaluation`` was imported, before the code location builds its
definitions, gets its config section as one registered by a plugin does (``resources.config_from.with_sections``,
as the late ``tally`` source of tests/envs/test_toy_source.py): in ``SimulatorConfig``, in ``simulator_eval``'s
config schema (the Launchpad's), in a run config that names it, and its settings reach the kind when it scores."""

import duckdb
import pytest
from dagster import materialize
from dagster_duckdb import DuckDBResource

from pipeline.evaluate.simulators import KINDS, SimulatorKind
from tests.support.layouts import benchmark_split
from tests.support.plugin_example.envsim_counter_plugin.simulator import EchoSettings, EchoSimulator

#: the plugin example's echo kind (the executor's answer, its own feedback when set), registered in code under
#: another name after import: only the time of registration differs from the plugin's
ParrotSettings, ParrotSimulator = EchoSettings, EchoSimulator


@pytest.fixture
def parrot(tmp_path):
    """The ``parrot`` kind, registered after import, and the definitions built with it (then unregistered)."""
    from assets.definitions import build_definitions
    from assets.evaluation import SimulatorConfig
    from pipeline.core.settings import Settings

    assert "parrot" not in SimulatorConfig.model_fields
    KINDS.register(SimulatorKind("parrot", ParrotSimulator, baseline=True, settings=ParrotSettings))
    try:
        yield build_definitions(Settings(data_root=tmp_path / "data"))
    finally:
        KINDS.unregister("parrot")
        build_definitions(Settings(data_root=tmp_path / "data"))
        assert "parrot" not in SimulatorConfig.model_fields


def test_a_kind_registered_after_import_gets_its_config_section(parrot):
    from dagster._config import validate_config

    from assets.evaluation import EvalConfig, SimulatorConfig

    spec = SimulatorConfig(name="p", kind="parrot", parrot={"feedback": "hi"}).to_domain()
    assert spec.settings == ParrotSettings(feedback="hi")
    with pytest.raises(ValueError, match="feedbak"):
        SimulatorConfig(name="p", kind="parrot", parrot={"feedbak": "hi"})
    assert EvalConfig(simulators=[{"name": "p", "kind": "parrot", "parrot": {}}]).simulators[0].parrot is not None

    node = parrot.resolve_assets_def("simulator_eval").op
    simulator = node.config_field.config_type.fields["simulators"].config_type.inner_type.inner_type  # a list or None
    assert "parrot" in simulator.fields and "openai" in simulator.fields
    given = {"simulators": [{"name": "p", "kind": "parrot", "parrot": {"feedback": "hi"}}]}
    assert validate_config(node.config_field.config_type, given).success
    mistyped = {"simulators": [{"name": "p", "kind": "parrot", "parrot": {"feedbak": "hi"}}]}
    assert not validate_config(node.config_field.config_type, mistyped).success


def test_a_kind_registered_after_import_scores(parrot, default_layout, tmp_path):
    from assets.evaluation import simulator_eval
    from resources import DataStoreResource

    layout, version, samples, _ = benchmark_split(default_layout, tmp_path / "bench")
    db = tmp_path / "e.duckdb"
    config = {
        "simulators": [
            {"name": "oracle", "kind": "oracle"},
            {"name": "parrot", "kind": "parrot"},
            {"name": "parrot-said", "kind": "parrot", "parrot": {"feedback": "said"}},
        ]
    }
    result = materialize(
        [simulator_eval],
        resources={"store": DataStoreResource(data_root=str(layout.root)), "duckdb": DuckDBResource(database=str(db))},
        run_config={"ops": {"simulator_eval": {"config": config}}},
    )
    assert result.success
    con = duckdb.connect(str(db), read_only=True)
    runs = {name: (fm, cm) for name, fm, cm in con.execute("SELECT simulator, fm, cm FROM eval_runs").fetchall()}
    assert runs["parrot"] == runs["oracle"] == (100.0, 100.0)
    assert runs["parrot-said"][1] == 100.0 and runs["parrot-said"][0] < 100.0  # its own setting reached it
