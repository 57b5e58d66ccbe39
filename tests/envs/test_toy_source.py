"""Adding an environment source is one module and one registry line (docs/extending.md): a toy source
(tests/envs/toy_source.py) registered with one line runs through the DAG — catalog, trajectories
(unpartitioned and as its own partition), labeled steps — under its own name and license."""

import dataclasses

import pyarrow.parquet as pq
import pytest
from dagster import asset as dagster_asset

from pipeline.collect.explore import ExploreSettings
from pipeline.collect.run import collect_all
from pipeline.collect.sources import SourceConfig, disabled_sources, env_items
from pipeline.core.fields import setting
from pipeline.envs import registry
from pipeline.envs.catalog import build_catalog
from pipeline.envs.partitions import parse_shard, partition_keys
from pipeline.envs.registry import sources_config
from pipeline.export.hf_layout import _licenses
from pipeline.labeling.steps import label
from pipeline.store.layout import DataLayout
from tests.envs.toy_source import ToySource

EXPLORE = ExploreSettings(call_budget=40, episode_length=4, batch_episodes=3, min_envs=1)
CFG = sources_config(bfcl={"categories": []}, builtin={"enabled": False})  # only the toy source has environments


@pytest.fixture
def toy():
    source = registry.register(ToySource(tasks=3))  # the one line
    yield source
    registry.unregister(source.name)


def _catalogued(root) -> DataLayout:
    layout = DataLayout.at(root)
    items, issues = env_items(CFG)
    build_catalog(layout, items, issues, disabled=disabled_sources(CFG))
    return layout


def test_a_registered_source_runs_through_the_dag(tmp_path, sandbox, toy):
    assert registry.names()[-1] == "toy" and "toy-0" in partition_keys(1)
    layout = _catalogued(tmp_path / "a")
    catalog = pq.read_table(layout.environments).to_pylist()
    assert [(r["source"], r["env_id"], r["license"], r["num_tools"]) for r in catalog] == [
        ("toy", "toy/counter", "CC0-1.0", 2)
    ]

    result = collect_all(CFG, layout, sandbox, EXPLORE)
    trajectories = pq.read_table(layout.trajectories).to_pylist()
    assert result.report.trajectories == len(trajectories) > 0
    assert {t["env_id"] for t in trajectories} == {"toy/counter"}
    assert {registry.source_of_id(t["adapter"], t["env_id"]) for t in trajectories} == {"toy"}
    assert {t["source"] for t in trajectories} == {"toy"}  # the source, not the adapter it reuses

    report = label(layout, sandbox)
    steps = [r for part in layout.step_parts() for r in pq.read_table(part, columns=["env_id", "tool"]).to_pylist()]
    assert report.steps == len(steps) > 0
    assert {s["env_id"] for s in steps} == {"toy/counter"} and {s["tool"] for s in steps} <= {"add", "reset"}

    assert _licenses(layout, ["toy/counter"]) == {"toy": "CC0-1.0"}  # the catalog's license first


def test_the_toy_source_has_its_own_partition(tmp_path, sandbox, toy):
    layout = _catalogued(tmp_path / "b")
    result = collect_all(CFG, layout, sandbox, EXPLORE, shard=parse_shard("toy-0", 1))
    rows = pq.read_table(layout.for_partition("toy-0").trajectories).to_pylist()
    assert result.report.trajectories == len(rows) > 0 and {r["env_id"] for r in rows} == {"toy/counter"}
    assert result.shard.note.startswith("partition toy-0: 1 of the 1 toy environments (shard 0 of 1)")
    empty = collect_all(CFG, layout, sandbox, EXPLORE, shard=parse_shard("builtin-0", 1))
    assert empty.report.trajectories == 0 and "builtin pack is off" in empty.shard.note


def test_registration_is_one_line_and_reversible(toy):
    with pytest.raises(ValueError, match="registered already"):
        registry.register(ToySource())
    assert registry.licenses()["toy"] == "CC0-1.0 (toy counter)"  # the card's line where the catalog has none
    assert _licenses(DataLayout.at("/nonexistent"), ["toy/x"]) == {"toy": "CC0-1.0 (toy counter)"}
    registry.unregister("toy")
    assert "toy" not in registry.names() and registry.names() == ("bfcl", "builtin", "envscaler", "served")
    registry.register(toy)  # back for the fixture's teardown


def test_the_toy_source_runs_through_the_dagster_assets(tmp_path, toy):
    """The same one-line registration, through the code location's own assets (``build_definitions``):
    environment_catalog -> trajectories -> labeled_steps with their checks, the toy's rows under its name."""
    from dagster import AssetKey, materialize

    from assets.definitions import build_definitions
    from pipeline.core.settings import Settings
    from resources import EnvironmentSourcesResource, SandboxResource

    data = tmp_path / "data"
    defs = build_definitions(Settings(data_root=data))
    wanted = [AssetKey(k) for k in ("environment_catalog", "trajectories", "labeled_steps")]
    assets = [a for a in defs.assets if any(k in wanted for k in a.keys)]
    checks = [c for c in defs.asset_checks if any(k.asset_key in wanted for k in c.check_keys)]
    resources = {
        **defs.resources,
        "sources": EnvironmentSourcesResource(bfcl={"categories": []}, builtin={"enabled": False}),
        "sandbox": SandboxResource(workers=1),
    }
    result = materialize(
        [*assets, *checks],
        resources=resources,
        run_config={
            "resources": {"store": {"config": {"data_root": str(data)}}},
            "ops": {
                "trajectories": {"config": {"call_budget": 40, "episode_length": 4, "batch_episodes": 3, "min_envs": 1}}
            },
        },
    )
    assert result.success
    meta = {
        e.asset_key.to_user_string(): {
            k: getattr(v, "value", v) for k, v in e.event_specific_data.materialization.metadata.items()
        }
        for e in result.get_asset_materialization_events()
    }
    assert set(meta) == {"environment_catalog", "trajectories", "labeled_steps"}
    layout = DataLayout.at(data)
    catalog = pq.read_table(layout.environments).to_pylist()
    assert [(r["source"], r["env_id"], r["license"]) for r in catalog] == [("toy", "toy/counter", "CC0-1.0")]
    steps = [r for part in layout.step_parts() for r in pq.read_table(part, columns=["env_id", "tool"]).to_pylist()]
    assert len(steps) > 0 and {s["env_id"] for s in steps} == {"toy/counter"}
    assert {c.check_name: c.passed for c in result.get_asset_check_evaluations()}, "no checks ran on the toy's steps"
    assert all(c.passed for c in result.get_asset_check_evaluations()), [
        (c.check_name, c.metadata) for c in result.get_asset_check_evaluations() if not c.passed
    ]


@dataclasses.dataclass(frozen=True)
class TallySettings:
    """How many counter tasks the tally source offers."""

    tasks: int = setting(3, "Counter tasks to offer.")


class TallySource(ToySource):
    """The toy counter under another name, with settings: its section comes from its settings dataclass."""

    name = "tally"
    prefix = "tally"
    settings = TallySettings


def test_a_source_registered_after_import_gets_its_config_section(tmp_path):
    """Registered in code after the resources were imported: the code location's sources resource still has its
    section (``resources.environments.source_sections``, called by ``build_definitions``), its values reach the source,
    a mistyped key is refused, and Dagster's run config sets it; unregistered, the section is gone again."""
    import pydantic
    from dagster import materialize

    from assets.definitions import build_definitions
    from pipeline.core.settings import Settings
    from resources import EnvironmentSourcesResource
    from resources.environments import source_sections

    assert "tally" not in EnvironmentSourcesResource.model_fields
    source = registry.register(TallySource())
    try:
        defs = build_definitions(Settings(data_root=tmp_path / "data"))
        assert "tally" in type(defs.resources["sources"]).model_fields
        layout = DataLayout.at(tmp_path)
        assert EnvironmentSourcesResource().config(layout).of(source) == TallySettings()
        assert EnvironmentSourcesResource(tally={"tasks": 5}).config(layout).of(source) == TallySettings(tasks=5)
        with pytest.raises(pydantic.ValidationError, match="taks"):
            EnvironmentSourcesResource(tally={"taks": 5})

        @dagster_asset
        def tally_tasks(sources: EnvironmentSourcesResource) -> int:
            return sources.config(layout).of(registry.get("tally")).tasks

        result = materialize(
            [tally_tasks],
            resources={"sources": defs.resources["sources"]},
            run_config={"resources": {"sources": {"config": {"tally": {"tasks": 7}}}}},
        )
        assert result.output_for_node("tally_tasks") == 7
    finally:
        registry.unregister("tally")
        source_sections()
    assert "tally" not in EnvironmentSourcesResource.model_fields


class TallyList(TallySource):
    """A list source (``many``): its section is a list, unset by default."""

    name = "tallies"
    prefix = "tallies"
    many = True


def test_a_list_source_left_unset_has_no_entries(tmp_path):
    from resources import EnvironmentSourcesResource
    from resources.environments import source_sections

    source = registry.register(TallyList())
    try:
        source_sections()
        layout = DataLayout.at(tmp_path)
        assert EnvironmentSourcesResource().config(layout).of(source) == []
        assert EnvironmentSourcesResource(tallies=[{"tasks": 2}]).config(layout).of(source) == [TallySettings(tasks=2)]
    finally:
        registry.unregister("tallies")
        source_sections()
