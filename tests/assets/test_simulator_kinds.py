"""A simulator kind is one registry entry (``pipeline.evaluate.simulators.KINDS``, a
``pipeline.core.registry.Registry``): what it makes and
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
        spec = simulators.simulator_spec(
            name=kind, kind=kind, **({"model": "m", "base_url": "http://127.0.0.1:9/v1"} if kind == "openai" else {})
        )
        runner = RolloutRunner(simulators.make_simulator(spec), sandbox=None, log=None)
        assert runner._asks_model is asks, kind


def test_serve_config_is_derived_from_the_simulator_spec_and_the_endpoint_settings():
    from assets.training import ServeConfig

    config = ServeConfig(checkpoint="latest")
    fields = {f.name: f for cls in (SimulatorSpec, EndpointSettings) for f in dataclasses.fields(cls)}
    spec_defaults = {name: f.default for name, f in fields.items()}
    assert config.simulator() == {
        name: SERVED_SIMULATOR_DEFAULTS.get(name, spec_defaults[name]) for name in SERVED_SIMULATOR_FIELDS
    }
    for name in SERVED_SIMULATOR_FIELDS:  # the description is SimulatorSpec's own, written once
        assert ServeConfig.model_fields[name].description == description(fields[name]) and description(fields[name])


def test_a_kinds_settings_show_only_in_its_own_section():
    """The openai endpoint's fields and the recorded answers' file are their kinds' settings: the simulator
    config shows them in the section named after the kind, not beside the fields every kind has."""
    from assets.evaluation import SimulatorConfig

    top = set(SimulatorConfig.model_fields)
    assert {"name", "kind", "prompt", "concurrency"} <= top
    assert not top & ({f.name for f in dataclasses.fields(EndpointSettings)} | {"completions"})
    assert {"openai", "recorded"} <= top and not {"oracle", "no_change"} & top  # baselines have no settings
    openai = SimulatorConfig.model_fields["openai"].annotation.__args__[0]
    assert {"model", "base_url", "api_key_env", "max_response_bytes"} <= set(openai.model_fields)
    spec = SimulatorConfig(name="m", kind="openai", concurrency=2, openai={"model": "m", "max_retries": 0}).to_domain()
    assert spec.settings == EndpointSettings(model="m", max_retries=0) and spec.concurrency == 2 and spec.model == "m"
    assert SimulatorConfig(
        name="r", kind="recorded", recorded={"completions": "a.jsonl"}
    ).to_domain().settings == simulators.RecordedSettings(completions="a.jsonl")
    with pytest.raises(ValueError, match="section `recorded` is for kind recorded, not openai"):
        SimulatorConfig(name="m", kind="openai", recorded={"completions": "a.jsonl"}).to_domain()


def test_a_misplaced_setting_names_the_kind_it_belongs_to():
    with pytest.raises(ValueError, match="`completions` is a setting of kind recorded, not of openai"):
        simulators.simulator_spec(name="m", kind="openai", model="m", completions="a.jsonl")
    with pytest.raises(ValueError, match="`model` is a setting of kind openai, not of oracle"):
        simulators.simulator_spec(name="o", kind="oracle", model="m")
    flat = simulators.simulator_spec(name="m", kind="openai", model="m", base_url="http://h/v1", concurrency=3)
    assert flat == simulators.simulator_spec(
        name="m", kind="openai", concurrency=3, openai={"model": "m", "base_url": "http://h/v1"}
    )
    with pytest.raises(ValueError, match="needs `completions`"):
        simulators.make_simulator(SimulatorSpec(name="r", kind="recorded"))


def test_a_kind_section_in_the_asset_config_refuses_a_mistyped_key():
    """The sections come from one builder (``resources.config_from.with_sections``) for sources and kinds alike:
    a key its settings do not have is an error naming it, not a setting silently dropped."""
    import pydantic

    from assets.evaluation import SimulatorConfig

    spec = SimulatorConfig(name="m", kind="openai", openai={"model": "m", "base_url": "http://h/v1"}).to_domain()
    assert spec.settings.model == "m" and spec.settings.base_url == "http://h/v1"
    with pytest.raises(pydantic.ValidationError, match="modle"):
        SimulatorConfig(name="m", kind="openai", openai={"modle": "m"})
