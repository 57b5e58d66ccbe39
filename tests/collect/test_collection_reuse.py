"""Collection is a no-op when its inputs are unchanged (pipeline/collect/reuse.py): the recorded result
is returned and the files are left untouched; a changed seed, source setting or source file, a changed or
damaged output file, ``force`` or an LLM agent collect again. Per partition as well."""

import dataclasses
import hashlib
import json

import pytest

from pipeline.collect import reuse
from pipeline.collect.explore import ExploreSettings
from pipeline.collect.run import AgentRun, collect_all
from pipeline.collect.sources import SourceConfig, env_items
from pipeline.envs.catalog import build_catalog
from pipeline.envs.partitions import parse_shard, partition_keys
from pipeline.envs.registry import sources_config
from pipeline.models.agent_settings import AgentSettings
from pipeline.store.layout import DataLayout
from pipeline.store.partitions import Shard
from tests.assets.test_partitions import write_shop_corpus
from tests.conftest import TWITTER_CFG, make_task_file
from tests.support.bad_tasks import _task

EXPLORE = ExploreSettings(call_budget=120, episode_length=6, batch_episodes=12, min_envs=1)


def files(layout: DataLayout) -> dict[str, tuple[int, str]]:
    """Every file under trajectories/: (mtime_ns, sha256)."""
    return {
        p.name: (p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
        for p in sorted(layout.trajectories_dir.iterdir())
        if p.is_file() and not p.name.startswith(".")
    }


def contents(layout: DataLayout) -> dict[str, str]:
    return {name: digest for name, (_mtime, digest) in files(layout).items()}


def summary(result) -> dict:
    r, cov = result.report, result.coverage
    return {
        "trajectories": r.trajectories,
        "actions": r.actions,
        "issues": [dataclasses.asdict(i) for i in r.issues],
        "by_category": dict(r.by_category),
        "by_env": dict(r.by_env),
        "by_strategy": dict(r.by_strategy),
        "coverage": None
        if cov is None
        else (
            cov.steps,
            dict(cov.cells),
            {k: sorted(v) for k, v in cov.cell_envs.items()},
            dict(cov.groups),
            cov.targets(),
            cov.short(),
        ),
        "without": (result.without_scenarios, result.explored_without),
        "shard": None
        if result.shard is None
        else (result.shard.note, sorted(result.shard.source_envs), sorted(result.shard.shard_envs)),
    }


@pytest.fixture(scope="module")
def cfg(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("reuse-sources")
    tasks = make_task_file(
        tmp,
        [_task("good_tweets", ["TwitterAPI"], TWITTER_CFG), "{not json", _task("good_math", ["MathAPI"])],
        [
            {"id": "good_tweets", "ground_truth": [["post_tweet(content='hello', tags=['#a'])"]]},
            {"id": "good_math", "ground_truth": [["add(a=1, b=2)", "mean(numbers=[1, 2, 3])"]]},
        ],
    )
    return sources_config(
        bfcl={"categories": [], "task_files": [tasks]},
        builtin={"scenarios_per_env": 1},
        envscaler=[write_shop_corpus(tmp)],
    )


def catalogued(root, cfg: SourceConfig) -> DataLayout:
    layout = DataLayout.at(root)
    items, issues = env_items(cfg)
    build_catalog(layout, items, issues)
    return layout


def test_an_unchanged_collection_is_reused_untouched_and_identical_to_a_recollection(tmp_path, cfg, sandbox):
    layout = catalogued(tmp_path / "data", cfg)
    first = collect_all(cfg, layout, sandbox, EXPLORE)
    assert not first.reused and first.report.trajectories > 10 and first.report.issues
    before = files(layout)
    assert reuse.record_path(layout).name in before

    lines: list[str] = []
    again = collect_all(cfg, layout, sandbox, EXPLORE, log=lines.append)
    assert again.reused
    assert summary(again) == summary(first)
    assert files(layout) == before  # not one byte, not one mtime
    assert any("unchanged" in line and "reused" in line for line in lines), lines

    forced = collect_all(cfg, layout, sandbox, EXPLORE, force=True)  # what a re-collection writes: the same bytes
    assert not forced.reused and summary(forced) == summary(first)
    assert contents(layout) == {name: digest for name, (_m, digest) in before.items()}
    assert files(layout) != before  # written again (new mtimes)

    reseeded = collect_all(cfg, layout, sandbox, dataclasses.replace(EXPLORE, seed=5))
    assert not reseeded.reused
    changed = dataclasses.replace(
        cfg, sections={**cfg.sections, "builtin": dataclasses.replace(cfg.sections["builtin"], seed=3)}
    )
    assert not collect_all(changed, layout, sandbox, dataclasses.replace(EXPLORE, seed=5)).reused
    assert collect_all(changed, layout, sandbox, dataclasses.replace(EXPLORE, seed=5)).reused
    assert not collect_all(changed, layout, sandbox, None).reused  # exploration off
    assert collect_all(changed, layout, sandbox, None).reused


def test_a_changed_source_file_or_damaged_output_is_collected_again(tmp_path, cfg, sandbox):
    root = tmp_path / "src"
    root.mkdir()
    own = sources_config(
        bfcl={
            "categories": [],
            "task_files": [
                make_task_file(root, [_task("t1", ["MathAPI"])], [{"id": "t1", "ground_truth": [["add(a=1, b=2)"]]}])
            ],
        },
        builtin={"enabled": False},
    )
    layout = catalogued(tmp_path / "data", own)
    assert collect_all(own, layout, sandbox, None).report.trajectories == 1
    assert collect_all(own, layout, sandbox, None).reused
    own.sections["bfcl"].task_files[0].answers.write_text(
        json.dumps({"id": "t1", "ground_truth": [["add(a=2, b=2)"]]}) + "\n"
    )
    lines: list[str] = []
    assert not collect_all(own, layout, sandbox, None, log=lines.append).reused
    assert any("inputs changed" in line for line in lines), lines
    assert collect_all(own, layout, sandbox, None).reused
    for damaged in (layout.collection_issues, layout.trajectories, layout.collected_steps):
        damaged.unlink()
        lines = []
        again = collect_all(own, layout, sandbox, None, log=lines.append)
        assert not again.reused and again.report.trajectories == 1 and damaged.exists()
        assert any(damaged.name in line for line in lines), lines
    layout.trajectories.write_bytes(layout.trajectories.read_bytes())  # same bytes: still intact
    assert collect_all(own, layout, sandbox, None).reused


def test_an_llm_agent_is_never_reused(cfg):
    from pipeline.execution.sandbox import Sandbox

    box = Sandbox(workers=1)  # not entered: the fingerprint only reads its limits
    agent = AgentRun(AgentSettings(model="m", base_url="http://127.0.0.1:9/v1"))
    assert reuse.fingerprint(cfg, box, EXPLORE, None, None, agent) is None
    assert reuse.fingerprint(cfg, box, EXPLORE, None, None, None) == reuse.fingerprint(
        cfg, box, EXPLORE, None, None, None
    )
    assert reuse.fingerprint(cfg, box, EXPLORE, None, None, None) != reuse.fingerprint(
        cfg, box, EXPLORE, None, Shard("bfcl", 0, 2), None
    )


def test_the_fingerprint_does_not_name_the_data_root(tmp_path, cfg):
    """The served source's log lives under the data root: two roots (a moved one, a killed run's and a reference
    run's) with the same inputs fingerprint alike, so collection is reused, and its record is the same bytes."""
    from pipeline.envs.registry import SOURCES
    from pipeline.execution.sandbox import Sandbox

    box = Sandbox(workers=1)
    served = SOURCES.find("served")

    def at(root):
        return dataclasses.replace(cfg, sections={**cfg.sections, "served": served.at_root(cfg.of(served), root)})

    one, other = at(tmp_path / "one"), at(tmp_path / "elsewhere" / "two")
    assert str(tmp_path / "one") in json.dumps(reuse._plain(one))  # the path is in the configuration
    assert reuse.fingerprint(one, box, EXPLORE, None, None, None, tmp_path / "one") == reuse.fingerprint(
        other, box, EXPLORE, None, None, None, tmp_path / "elsewhere" / "two"
    )


def test_each_partition_is_reused_on_its_own(tmp_path, cfg, sandbox):
    layout = catalogued(tmp_path / "data", cfg)
    keys = partition_keys(2)
    first = {k: collect_all(cfg, layout, sandbox, EXPLORE, shard=parse_shard(k, 2)) for k in keys}
    assert not any(r.reused for r in first.values())
    assert sum(r.report.trajectories for r in first.values()) > 10
    before = files(layout)
    again = {k: collect_all(cfg, layout, sandbox, EXPLORE, shard=parse_shard(k, 2)) for k in keys}
    assert all(r.reused for r in again.values())
    assert {k: summary(r) for k, r in again.items()} == {k: summary(r) for k, r in first.items()}
    assert files(layout) == before
    # one partition re-collected with another seed: only it
    redone = collect_all(cfg, layout, sandbox, dataclasses.replace(EXPLORE, seed=9), shard=parse_shard("builtin-1", 2))
    assert not redone.reused
    after = files(layout)
    changed = {n for n in after if after[n] != before.get(n)}
    assert changed and all("builtin-1" in n for n in changed), changed
    assert collect_all(cfg, layout, sandbox, EXPLORE, shard=parse_shard("builtin-0", 2)).reused
    assert not collect_all(cfg, layout, sandbox, EXPLORE, shard=parse_shard("builtin-1", 2)).reused  # back to seed 0
    # another partitioning drops every partition's files: nothing to reuse
    assert not collect_all(cfg, layout, sandbox, EXPLORE, shard=parse_shard("builtin-0", 3)).reused
    # and an unpartitioned collection after it neither
    assert not collect_all(cfg, layout, sandbox, EXPLORE).reused


def test_the_trajectories_asset_reports_reuse_and_force_collects(tmp_path, cfg):
    from dagster import materialize

    from assets.collection import trajectories
    from assets.environments import environment_catalog
    from resources import (
        CompositionResource,
        DataStoreResource,
        EnvironmentSourcesResource,
        RunPolicyResource,
        SandboxResource,
    )

    files_ = cfg.sections["bfcl"].files()
    resources = {
        "store": DataStoreResource(data_root=str(tmp_path / "data")),
        "sources": EnvironmentSourcesResource(
            bfcl={"categories": [], "task_files": [dict(tasks=str(f.tasks), answers=str(f.answers)) for f in files_]},
            builtin={"enabled": False},
        ),
        "sandbox": SandboxResource(workers=1),
        "composition": CompositionResource(),
        "run_policy": RunPolicyResource(),
    }
    assert materialize([environment_catalog], resources=resources).success

    def run(**config):
        result = materialize(
            [trajectories],
            resources=resources,
            run_config={"ops": {"trajectories": {"config": {"enabled": False, **config}}}},
        )
        assert result.success
        event = result.get_asset_materialization_events()[0]
        return {k: getattr(v, "value", v) for k, v in event.event_specific_data.materialization.metadata.items()}

    first, second, third = run(), run(), run(force=True)
    assert (first["reused"], second["reused"], third["reused"]) == (False, True, False)
    assert first["trajectories"] == second["trajectories"] == third["trajectories"] == 2
    assert first["rejected_tasks"] == second["rejected_tasks"] == 1
    assert first["dagster/row_count"] == second["dagster/row_count"]
