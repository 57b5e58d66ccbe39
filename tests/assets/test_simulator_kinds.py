"""A simulator kind is one registry entry (``pipeline.evaluate.simulators.KINDS``, a ``pipeline.core.registry.Registry``): what it makes and
whether it asks a model or is a baseline; the rollout loop and the evaluation job's ``serve`` take
those from the registry and ``SimulatorSpec``, never from a kind's name written elsewhere."""

import dataclasses

import pytest

from pipeline.core.fields import description
from pipeline.evaluate import simulators
from pipeline.evaluate.simulator_spec import Completion, EndpointSettings, SimulatorSpec
from pipeline.training.serve import SERVED_SIMULATOR_DEFAULTS, SERVED_SIMULATOR_FIELDS


class EchoSimulator:
    """A toy kind: answers the same text to every sample."""

    def __init__(self, spec: SimulatorSpec) -> None:
        self.spec = spec

    async def complete(self, sample: dict) -> Completion:
        return Completion('{"feedback": "echo", "config_changes": []}', 0.0)

    async def aclose(self) -> None:
        pass


@pytest.fixture
def echo_kind():
    kind = simulators.KINDS.register(simulators.SimulatorKind("echo", EchoSimulator, asks_model=True))  # the one line
    yield kind
    simulators.KINDS.unregister(kind.name)


def test_a_new_kind_is_one_registry_line(echo_kind):
    made = simulators.make_simulator(SimulatorSpec(name="e", kind="echo"))
    assert isinstance(made, EchoSimulator) and simulators.kind_of(made.spec).asks_model
    assert [k for k, v in simulators.KINDS.items() if v.asks_model] == ["openai", "echo"]
    assert {k for k, v in simulators.KINDS.items() if v.baseline} == {"oracle", "oracle_envsimbench", "no_change"}


def test_an_unknown_kind_names_the_known_ones():
    try:
        simulators.make_simulator(SimulatorSpec(name="x", kind="nosuch"))
    except ValueError as exc:
        assert "unknown simulator kind 'nosuch'" in str(exc) and "openai" in str(exc)
    else:
        raise AssertionError("an unknown kind must be refused")


def test_the_rollout_loop_asks_a_model_only_for_a_kind_that_does():
    from pipeline.rollouts.loop import RolloutRunner

    for kind, asks in (("oracle", False), ("no_change", False), ("openai", True)):
        spec = simulators.simulator_spec(name=kind, kind=kind, **({"model": "m", "base_url": "http://127.0.0.1:9/v1"}
                                                                  if kind == "openai" else {}))
        runner = RolloutRunner(simulators.make_simulator(spec), sandbox=None, log=None)
        assert runner._asks_model is asks, kind


def test_serve_config_is_derived_from_the_simulator_spec_and_the_endpoint_settings():
    from assets.training import ServeConfig

    config = ServeConfig(checkpoint="latest")
    fields = {f.name: f for cls in (SimulatorSpec, EndpointSettings) for f in dataclasses.fields(cls)}
    spec_defaults = {name: f.default for name, f in fields.items()}
    assert config.simulator() == {name: SERVED_SIMULATOR_DEFAULTS.get(name, spec_defaults[name]) for name in SERVED_SIMULATOR_FIELDS}
    for name in SERVED_SIMULATOR_FIELDS:  # the description is SimulatorSpec's own, written once
        assert ServeConfig.model_fields[name].description == description(fields[name]) and description(fields[name])
