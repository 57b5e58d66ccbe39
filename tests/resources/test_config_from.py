"""Each Dagster config / resource is derived from its domain dataclass: one list of fields, one default,
one description (resources/config_from.py)."""

import dataclasses
from pathlib import Path

import pytest
from dagster import Config, ConfigurableResource, asset, materialize
from dagster._config.pythonic_config import infer_schema_from_config_class

from assets.collection import AgentPolicyConfig, CollectionConfig
from assets.evaluation import SimulatorConfig
from assets.simulation import CurriculumConfig
from assets.training import ServeConfig, TrainConfig
from pipeline.collect.explore import ExploreSettings
from pipeline.collect.run import AgentRun
from pipeline.collect.sources import SourceConfig
from pipeline.core.fields import description, setting
from pipeline.core.profile import RunPolicy
from pipeline.core.strata import Cell
from pipeline.curriculum.mixture import CurriculumSpec
from pipeline.envs import registry
from pipeline.envs.bfcl_tasks import BfclTaskFile
from pipeline.envs.config import EnvScalerCorpus
from pipeline.envs.registry import sources_config
from pipeline.envs.sources.bfcl import BfclSettings
from pipeline.envs.sources.builtin import BuiltinSettings
from pipeline.envs.sources.served import ServedSettings
from pipeline.evaluate.simulator_spec import EndpointSettings, RecordedSettings
from pipeline.evaluate.simulators import SimulatorSpec
from pipeline.execution.child import Limits
from pipeline.execution.policy import PolicySettings
from pipeline.models.agent_settings import AgentSettings
from pipeline.store.layout import DataLayout
from pipeline.training.launchers import JobSpec
from pipeline.training.llamafactory import TrainSettings
from pipeline.training.serve import ServeSpec
from resources import CompositionResource, EnvironmentSourcesResource, JobLauncherResource, SandboxResource
from resources.composition import CellConfig, RunPolicyResource
from resources.config_from import config_from, nested

# (Dagster class, dataclass, the dataclass fields it does not derive, fields of its own (some of them), config keys
# renamed)
PAIRS = [
    (
        CollectionConfig,
        ExploreSettings,
        {"call_budget", "max_call_budget"},
        {"enabled", "force", "agent", "call_budget"},
        {},
    ),
    (AgentPolicyConfig, AgentSettings, set(), {"sources", "task_limit"}, {}),
    (AgentPolicyConfig, AgentRun, {"settings"}, {f.name for f in dataclasses.fields(AgentSettings)}, {}),
    (SimulatorConfig, SimulatorSpec, {"settings"}, {"openai", "recorded"}, {}),  # a kind's settings: its section
    (SimulatorConfig.model_fields["openai"].annotation.__args__[0], EndpointSettings, set(), set(), {}),
    (SimulatorConfig.model_fields["recorded"].annotation.__args__[0], RecordedSettings, set(), set(), {}),
    (TrainConfig, TrainSettings, set(), {"gpus", "nodes"}, {"extra": "extra_args"}),
    (
        ServeConfig,
        ServeSpec,
        {
            "model_name_or_path",
            "template",
            "served_name",
            "adapter_name_or_path",
            "llamafactory_cli",
            "llamafactory_python",
        },
        {
            "checkpoint",
            "served_model_name",
            "template",
            "base_model",
            "max_tokens",
            "temperature",
            "concurrency",
            "timeout_s",
            "max_retries",
        },
        {},
    ),
    (CurriculumConfig, CurriculumSpec, {"run_id"}, {"simulator", "split_version", "make_current"}, {}),
    (SandboxResource, Limits, set(), {"workers", "isolation"}, {}),
    (EnvironmentSourcesResource, SourceConfig, {"sections"}, {"bfcl", "builtin", "envscaler", "served"}, {}),
    (nested(BfclSettings), BfclSettings, set(), set(), {}),
    (nested(BuiltinSettings), BuiltinSettings, set(), set(), {}),
    (nested(ServedSettings), ServedSettings, set(), set(), {}),
    (nested(BfclTaskFile), BfclTaskFile, set(), set(), {}),
    (nested(EnvScalerCorpus), EnvScalerCorpus, set(), set(), {}),
    (CellConfig, Cell, set(), set(), {}),
    (RunPolicyResource, RunPolicy, set(), set(), {}),
    (
        JobLauncherResource,
        JobSpec,
        {"name", "script", "workdir", "env", "nodes", "requeue"},
        {"backend", "workdir", "python"},
        {},
    ),
]


def _default(f: dataclasses.Field):
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def _config_default(info):
    if info.default_factory is not None:
        return info.default_factory()
    return dataclasses.MISSING if info.is_required() else info.default


def _as_config(value):
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (tuple, list)):
        return [_as_config(v) for v in value]
    return value


@pytest.mark.parametrize(
    "config_cls, domain, excluded, own, aliases", PAIRS, ids=[f"{p[0].__name__}-{p[1].__name__}" for p in PAIRS]
)
def test_config_fields_are_the_dataclass_fields(config_cls, domain, excluded, own, aliases):
    fields = {f.name: f for f in dataclasses.fields(domain)}
    model = config_cls.model_fields
    derived = set(fields) - excluded
    assert derived <= set(model), f"{config_cls.__name__} lacks {sorted(derived - set(model))}"
    schema = infer_schema_from_config_class(config_cls).config_type.fields  # what the Launchpad shows
    for name in derived - own:
        f, info = fields[name], model[name]
        assert _config_default(info) == _as_config(_default(f)), f"{config_cls.__name__}.{name}: default differs"
        assert info.description == description(f), f"{config_cls.__name__}.{name}: description differs"
        key = aliases.get(name, name)
        assert key in schema and schema[key].description == description(f)
    assert own <= set(model) and not own & derived, "a field of its own must not shadow a derived one"


def test_every_derived_field_says_what_it_is():
    for config_cls, domain, excluded, _own, _aliases in PAIRS:
        for f in dataclasses.fields(domain):
            assert f.name in excluded or description(f), (
                f"{domain.__name__}.{f.name} has no description for the Launchpad"
            )
    assert all(description(f) for f in dataclasses.fields(PolicySettings))


def test_default_config_builds_the_default_dataclass():
    assert CollectionConfig().settings(RunPolicyResource().explore_call_budget) == ExploreSettings()
    assert (
        CollectionConfig(call_budget=7).settings(60_000).call_budget == 7
    )  # a config's budget wins over the resource's
    assert CollectionConfig().agent_run() is None
    assert AgentPolicyConfig(model="m").agent_run() == AgentRun(AgentSettings(model="m"))
    assert SimulatorConfig(name="s").to_domain() == SimulatorSpec(name="s")
    assert TrainConfig().to_domain() == TrainSettings()
    assert CurriculumConfig().to_domain(run_id="r@v") == CurriculumSpec(run_id="r@v")
    assert SandboxResource().limits() == Limits()
    derived, default = EnvironmentSourcesResource(envscaler=[]).config(DataLayout.at("unused")), sources_config()
    served = registry.get("served")  # its log is the data root's: the one default the root fills in
    assert all(derived.of(s) == default.of(s) for s in registry.sources() if s is not served)
    assert derived.of(served) == served.at_root(default.of(served), Path("unused"))
    assert derived.of(served).episodes == str(Path("unused") / "served" / "episodes.jsonl")
    assert JobLauncherResource().to_domain(name="j", script="true", workdir=Path("/w")) == JobSpec(
        "j", "true", Path("/w")
    )


def test_one_default_for_the_policy_knobs():
    """Exploration passes episode_length, mutate_rate and max_batch on to each episode's policy: the
    defaults the default run uses (12, 0.15, 6) are written once, on PolicySettings."""
    explore, policy = ExploreSettings(), PolicySettings()
    assert (explore.episode_length, explore.mutate_rate, explore.max_batch) == (12, 0.15, 6)
    assert (policy.episode_length, policy.mutate_rate, policy.max_batch) == (12, 0.15, 6)
    assert CollectionConfig.model_fields["episode_length"].description == description(
        {f.name: f for f in dataclasses.fields(PolicySettings)}["episode_length"]
    )


@dataclasses.dataclass(frozen=True)
class _Knobs:
    """Some knobs."""

    name: str = setting(description="required")
    budget: int = setting(5, "a budget")
    files: tuple[Path, ...] = setting((Path("/a"),), "some files")


def test_a_field_added_to_the_dataclass_appears_in_the_config():
    @dataclasses.dataclass(frozen=True)
    class More(_Knobs):
        rate: float = setting(0.25, "a new rate")

    class MoreConfig(config_from(More)):
        pass

    assert list(MoreConfig.model_fields) == ["name", "budget", "files", "rate"]
    schema = infer_schema_from_config_class(MoreConfig).config_type.fields
    assert schema["rate"].default_value == 0.25 and schema["rate"].description == "a new rate"
    assert schema["name"].is_required and not schema["budget"].is_required
    seen = []

    @asset
    def knobs(config: MoreConfig) -> None:
        seen.append(config.to_domain())

    run = {"ops": {"knobs": {"config": {"name": "n", "files": ["/x", "/y"]}}}}
    assert materialize([knobs], run_config=run).success
    assert seen == [More(name="n", files=(Path("/x"), Path("/y")))]  # Path and tuple back in the dataclass


def test_resource_and_renamed_key():
    class KnobsResource(config_from(_Knobs, aliases={"budget": "max_calls"}, base=ConfigurableResource)):
        def knobs(self) -> _Knobs:
            return self.to_domain()

    assert issubclass(KnobsResource, ConfigurableResource)
    assert KnobsResource(name="r", max_calls=9).knobs() == _Knobs(name="r", budget=9, files=(Path("/a"),))


def test_literal_fields_are_checked():
    with pytest.raises(Exception, match="kind"):
        SimulatorConfig(name="s", kind="bogus")


def test_a_nested_dataclass_is_a_nested_config_and_back():
    @dataclasses.dataclass
    class Nested:
        inner: _Knobs = dataclasses.field(default_factory=lambda: _Knobs(name="x"))
        more: tuple[_Knobs, ...] = ()

    config = config_from(Nested)(more=[{"name": "y"}])
    assert config.to_domain() == Nested(_Knobs(name="x"), (_Knobs(name="y"),))


def test_what_cannot_be_derived_is_refused():
    with pytest.raises(TypeError, match="no field"):
        config_from(_Knobs, exclude={"nope"})
    with pytest.raises(TypeError, match="dataclasses"):
        config_from(Config)
    with pytest.raises(TypeError, match="not derived from"):
        CollectionConfig().to_domain(Limits)


def test_configs_of_functions_take_the_functions_defaults():
    """Where a stage's knobs are keyword arguments, the config field's default is read from the function."""
    import inspect

    from assets.export import ExportConfig
    from assets.labeling import DeterminismConfig, LabelingConfig
    from assets.simulation import RolloutConfig, RolloutExportConfig
    from pipeline.export.hf_layout import export_split
    from pipeline.labeling.determinism import check_determinism
    from pipeline.labeling.steps import label
    from pipeline.rollouts.loop import simulate
    from pipeline.rollouts.sft import export_rollouts
    from pipeline.rollouts.store import recorded_tasks
    from resources.config_from import default_of

    def default(function, name):
        return inspect.signature(function).parameters[name].default

    assert LabelingConfig().chunk_size == default(label, "chunk_size")
    assert (DeterminismConfig().sample_size, DeterminismConfig().seed) == (
        default(check_determinism, "sample_size"),
        default(check_determinism, "seed"),
    )
    assert ExportConfig().max_shard_mb * 2**20 == default(export_split, "max_shard_bytes")
    assert ExportConfig().license == default(export_split, "license")
    rollout = RolloutConfig()
    assert (rollout.task_limit, rollout.seed, rollout.min_steps) == tuple(
        default(recorded_tasks, n) for n in ("limit", "seed", "min_steps")
    )
    assert rollout.max_steps == default(simulate, "max_steps")
    assert RolloutExportConfig().filter == default(export_rollouts, "how")
    from assets.envsimbench import EnvSimBenchImportConfig
    from pipeline.envsimbench.importer import download, import_envsimbench

    imported = EnvSimBenchImportConfig()
    assert imported.benchmark_patterns == list(default(download, "patterns"))
    assert imported.make_current == default(import_envsimbench, "make_current")
    with pytest.raises(TypeError, match="no default"):
        default_of(label, "layout")
