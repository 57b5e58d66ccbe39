"""The `trajectories` asset says what exploration found out about the corpus: the unreachable targets and why, why
it stopped and under which budget (metadata), and a warning in the run's log."""

from dagster import AssetKey, DagsterInstance, materialize

from assets.definitions import build_definitions
from pipeline.core.settings import Settings
from resources import EnvironmentSourcesResource, SandboxResource
from tests.support.handwritten_corpus import THREE, write_corpus


def test_the_unreachable_targets_are_in_the_metadata_and_the_log(tmp_path):
    corpus = write_corpus(tmp_path / "corpus", THREE)
    data = tmp_path / "data"
    defs = build_definitions(Settings(data_root=data))
    wanted = [AssetKey("environment_catalog"), AssetKey("trajectories")]
    assets = [a for a in defs.assets if any(k in wanted for k in a.keys)]
    sources = EnvironmentSourcesResource(
        bfcl={"categories": []},
        builtin={"enabled": False},
        envscaler=[dict(env_items=str(corpus.env_items), scenarios=str(corpus.scenarios))],
    )
    instance = DagsterInstance.ephemeral()
    result = materialize(
        assets,
        instance=instance,
        resources={**defs.resources, "sources": sources, "sandbox": SandboxResource(workers=1)},
        run_config={
            "resources": {"store": {"config": {"data_root": str(data)}}},
            "ops": {"trajectories": {"config": {"call_budget": 1200, "plateau_calls": 30, "batch_episodes": 20}}},
        },
    )
    assert result.success
    [meta] = [
        {k: getattr(v, "value", v) for k, v in e.event_specific_data.materialization.metadata.items()}
        for e in result.get_asset_materialization_events()
        if e.asset_key == AssetKey("trajectories")
    ]
    assert meta["exploration_call_budget"] == 1200
    assert "- difficult (|Δ| 7–12): unreachable, max |Δ| seen 3" in meta["exploration_unreachable"]
    assert "difficult (|Δ| 7–12): unreachable, max |Δ| seen 3" in meta["exploration_stopped"]
    status = {row.data["cell"]: row.data["status"] for row in meta["exploration_coverage"].records}
    assert status["difficult"] == "unreachable, max |Δ| seen 3"
    warnings = [e.user_message for e in instance.all_logs(result.run_id) if e.level == 30]  # logging.WARNING
    assert any("difficult (|Δ| 7–12): unreachable, max |Δ| seen 3" in w for w in warnings), warnings
