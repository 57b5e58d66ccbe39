"""Scale-out: collection and labeling partitioned by environment source and shard (ENVSIM_SHARDS),
the executor by configuration (ENVSIM_EXECUTOR), and a real partitioned backfill run by the daemon."""

import dataclasses
import json
import math
import os
import re
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

from pipeline.collect.explore import ExploreSettings
from pipeline.collect.run import collect_all
from pipeline.collect.sources import SourceConfig, env_items
from pipeline.core.issues import TaskIssue
from pipeline.core.settings import Settings
from pipeline.envs import bfcl, builtin
from pipeline.envs.bfcl_tasks import default_task_files, iter_tasks
from pipeline.envs.catalog import build_catalog
from pipeline.envs.config import EnvScalerCorpus
from pipeline.envs.partitions import parse_shard, partition_keys
from pipeline.envs.registry import names as source_names
from pipeline.envs.registry import source_of, sources_config
from pipeline.labeling.determinism import check_determinism
from pipeline.labeling.steps import label
from pipeline.store import warehouse
from pipeline.store.layout import DataLayout, step_part_partition
from pipeline.store.partitions import Shard, shard_index
from pipeline.store.reconstruct import verify_steps
from tests.support.envscaler_corpus import COUNTER_CODE
from tests.support.ui_server import ROOT, DagsterServer

SHOPS = ["shop_a", "shop_b", "shop_c", "shop_d", "shop_e", "shop_f"]


def write_shop_corpus(directory: Path) -> EnvScalerCorpus:
    """Six copies of a small EnvScaler shop (plus one item that does not compile), two scenarios each."""
    items = {
        name: {"env_class_name": "CounterShop", "env_class_code": COUNTER_CODE, "environment_introduction": "A shop."}
        for name in SHOPS
    }
    items["broken"] = {
        "env_class_name": "X",
        "env_class_code": "class X:\n    def f(self:\n        pass\n",
        "tools": [],
    }
    scenarios = [
        {
            "task_id": f"{name}-{i}",
            "env_id": name,
            "env_class_name": "CounterShop",
            "init_config": {"stock": {"pen": 3 + i, "ink": i}, "till": 0},
            "task": "Sell things.",
        }
        for name in SHOPS
        for i in range(2)
    ]
    (directory / "env_items.json").write_text(json.dumps(items))
    (directory / "scenarios.json").write_text(json.dumps(scenarios))
    return EnvScalerCorpus(directory / "env_items.json", directory / "scenarios.json")


def all_env_ids() -> list[str]:
    ids = {
        bfcl.env_id_for(t.involved_classes) for t in iter_tasks(default_task_files()) if not isinstance(t, TaskIssue)
    }
    ids |= {i.qualified_id for i in builtin.parsed_items()}
    ids |= {f"envscaler/env_{i}" for i in range(191)} | {f"mycorpus/{s}" for s in SHOPS}
    return sorted(ids)


# -- partition keys and shard assignment (no sandbox) ---------------------------------------------


def test_partition_keys_come_from_envsim_shards():
    assert Settings.from_env({}).shards is None and Settings.from_env({"ENVSIM_SHARDS": " "}).shards is None
    assert Settings.from_env({"ENVSIM_SHARDS": "3"}).shards == 3
    for bad in ("0", "-2", "two", "1.5"):
        with pytest.raises(ValueError, match="ENVSIM_SHARDS must be a whole number >= 1"):
            Settings.from_env({"ENVSIM_SHARDS": bad})
    assert partition_keys(1) == ["bfcl-0", "builtin-0", "envscaler-0"]
    assert partition_keys(2) == ["bfcl-0", "bfcl-1", "builtin-0", "builtin-1", "envscaler-0", "envscaler-1"]
    assert len(partition_keys(7)) == 7 * len(source_names()) - 7  # served episodes go to their environments'
    assert parse_shard("builtin-1", 2) == Shard("builtin", 1, 2) and Shard("builtin", 1, 2).key == "builtin-1"
    for bad in ("builtin-2", "nosuch-0", "bfcl", "bfcl-x"):
        with pytest.raises(ValueError, match="unknown partition"):
            parse_shard(bad, 2)
    out = subprocess.run(
        [sys.executable, "-m", "cli", "partitions"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "ENVSIM_SHARDS": "2"},
        check=True,
    )
    assert out.stdout.split() == partition_keys(2)


def test_every_environment_is_in_exactly_one_shard_always_the_same():
    ids = all_env_ids()
    assert len(ids) > 200
    from pipeline.core.environment import EnvSpec

    for count in (1, 2, 3, 5, 8):
        keys = partition_keys(count)
        for env_id in ids:
            spec = EnvSpec(source="bfcl" if env_id.startswith("bfcl/") else "envscaler", env_id=env_id)
            owners = [k for k in keys if parse_shard(k, count).holds(source_of(spec), spec.env_id)]
            assert owners == [f"{source_of(spec)}-{shard_index(env_id, count)}"], env_id
        if count > 1:  # a usable spread, not everything in one shard
            assert len({shard_index(e, count) for e in ids}) == count
    # stable: blake2b of the env id, the same in another process with another hash seed
    code = (
        "import json, sys; from pipeline.store.partitions import shard_index; "
        "print(json.dumps([shard_index(e, 5) for e in json.load(sys.stdin)]))"
    )
    for seed in ("1", "12345"):
        out = subprocess.run(
            [sys.executable, "-c", code],
            input=json.dumps(ids),
            cwd=ROOT,
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
            check=True,
        )
        assert json.loads(out.stdout) == [shard_index(e, 5) for e in ids]
    assert [shard_index(e, 2) for e in ("builtin/retail", "bfcl/GorillaFileSystem", "bfcl/MathAPI")] == [
        1,
        1,
        0,
    ]  # pinned


# -- collection and labeling per partition (sandbox) --------------------------------------------


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("shard-sources")
    return sources_config(
        bfcl={"categories": ["base"]},
        builtin={"scenarios_per_env": 2},
        envscaler=[dataclasses.replace(write_shop_corpus(tmp), prefix="mycorpus")],
    )


def catalogued(root: Path, cfg: SourceConfig) -> DataLayout:
    layout = DataLayout.at(root)
    items, issues = env_items(cfg)
    build_catalog(layout, items, issues)
    return layout


EXPLORE = ExploreSettings(call_budget=240, episode_length=6, batch_episodes=12, min_envs=2)


@pytest.fixture(scope="module")
def sharded(tmp_path_factory, sources, sandbox):
    """All 6 partitions (ENVSIM_SHARDS=2) collected (with exploration) and labeled."""
    layout = catalogued(tmp_path_factory.mktemp("sharded"), sources)
    results = {
        key: collect_all(sources, layout, sandbox, EXPLORE, shard=parse_shard(key, 2)) for key in partition_keys(2)
    }
    labels = {key: label(layout.for_partition(key), sandbox, chunk_size=60) for key in partition_keys(2)}
    return layout, results, labels


def test_shards_of_a_replay_are_exactly_the_unpartitioned_replay(tmp_path, sources, sandbox):
    plain = catalogued(tmp_path / "plain", sources)
    whole = collect_all(sources, plain, sandbox, None)
    parted = catalogued(tmp_path / "parted", sources)
    notes = {}
    for key in partition_keys(2):
        notes[key] = collect_all(sources, parted, sandbox, None, shard=parse_shard(key, 2)).shard.note
    ids = lambda files: [
        r["trajectory_id"] for f in files for r in pq.read_table(f, columns=["trajectory_id"]).to_pylist()
    ]
    assert sorted(ids(parted.trajectory_files())) == sorted(ids(plain.trajectory_files()))
    assert len(ids(parted.trajectory_files())) == whole.report.trajectories == 200
    for key in partition_keys(2):
        rows = pq.read_table(parted.for_partition(key).trajectories, columns=["source", "env_id"]).to_pylist()
        assert all(parse_shard(key, 2).index == shard_index(r["env_id"], 2) for r in rows)
    # issues naming no environment (the corpus item that does not compile) are reported once, by envscaler-0
    issues = {key: pq.read_table(parted.for_partition(key).collection_issues).to_pylist() for key in partition_keys(2)}
    assert (
        [i["task_id"] for i in issues["envscaler-0"]]
        == ["broken"]
        == [i["task_id"] for i in pq.read_table(plain.collection_issues).to_pylist()]
    )
    assert all(not v for k, v in issues.items() if k != "envscaler-0")
    assert notes["bfcl-0"].startswith("partition bfcl-0: 12 of the 20 bfcl environments (shard 0 of 2)")
    assert (
        notes["builtin-1"]
        == "empty partition builtin-1: this configuration collects nothing from builtin (e.g. exploration is off)"
    )


def test_partitions_explore_their_own_environments(sharded):
    layout, results, _ = sharded
    explored = {}
    for key, result in results.items():
        rows = pq.read_table(layout.for_partition(key).trajectories, columns=["env_id", "strategy"]).to_pylist()
        shard = parse_shard(key, 2)
        assert {r["env_id"] for r in rows} == result.shard.shard_envs
        assert all(shard_index(r["env_id"], 2) == shard.index for r in rows)
        explored[key] = {r["env_id"] for r in rows if r["strategy"] == "explore"}
    assert explored["builtin-0"] | explored["builtin-1"] == {i.qualified_id for i in builtin.parsed_items()}
    assert explored["envscaler-0"] | explored["envscaler-1"] == {f"mycorpus/{s}" for s in SHOPS}
    assert not explored["envscaler-0"] & explored["envscaler-1"]
    # the call budget is split by the share of explored environments
    share = len(results["builtin-1"].shard.shard_envs) / (len(builtin.parsed_items()) + len(SHOPS))
    assert results["builtin-1"].coverage.settings.call_budget == math.ceil(EXPLORE.call_budget * share)


def test_an_unconfigured_source_is_an_empty_partition(tmp_path, sandbox):
    cfg = sources_config(bfcl={"categories": []}, builtin={"enabled": False})
    layout = catalogued(tmp_path, cfg)
    result = collect_all(cfg, layout, sandbox, EXPLORE, shard=parse_shard("envscaler-1", 2))
    assert result.report.trajectories == 0
    assert result.shard.note == (
        "empty partition envscaler-1: no EnvScaler corpus configured (resources.sources.envscaler is empty)"
    )
    assert pq.read_table(layout.for_partition("envscaler-1").trajectories).num_rows == 0
    report = label(layout.for_partition("envscaler-1"), sandbox)
    assert (report.steps, report.parts_written) == (0, 0)
    assert verify_steps(layout.for_partition("envscaler-1")).ok
    assert check_determinism(layout.for_partition("envscaler-1"), sandbox).ok


def test_partitions_label_into_their_own_parts_and_verify(sharded):
    layout, results, labels = sharded
    for key in partition_keys(2):
        scoped = layout.for_partition(key)
        parts = scoped.step_parts()
        assert all(Path(p).name.startswith(f"part-{key}-") and step_part_partition(Path(p).name) == key for p in parts)
        assert labels[key].trajectories == results[key].report.trajectories
        assert sum(pq.read_metadata(p).num_rows for p in parts) == labels[key].steps
        assert (labels[key].steps > 0) == (results[key].report.trajectories > 0)
        assert verify_steps(scoped).ok
    assert sorted(layout.step_parts()) == sorted(
        p for k in partition_keys(2) for p in layout.for_partition(k).step_parts()
    )
    assert verify_steps(layout).ok  # the whole table: reconstruct.verify_steps over every partition
    # DuckDB views read every partition
    con = duckdb.connect()
    warehouse.sync(con, layout)
    assert con.execute("SELECT count(*) FROM trajectories").fetchone()[0] == sum(
        r.report.trajectories for r in results.values()
    )
    assert con.execute("SELECT count(*) FROM steps").fetchone()[0] == sum(r.steps for r in labels.values())


def test_relabeling_one_partition_leaves_the_others_alone(sharded, sandbox):
    layout, _, labels = sharded
    steps_dir = layout.steps_dir
    snapshot = lambda: {p.name: p.stat().st_mtime_ns for p in steps_dir.iterdir()}
    before = snapshot()
    bfcl0 = sorted(n for n in before if n.startswith("part-bfcl-0-"))
    assert len(bfcl0) == 4  # 115 trajectories in chunks of 60: two parts + their sidecars
    # stale files: an older part of bfcl-0, an unpartitioned run's part, a partition that no longer exists
    planted = [
        "part-bfcl-0-00000000000000000000.parquet",
        "part-bfcl-0-00000000000000000000.issues.json",
        "part-0123456789abcdef0123.parquet",
        "part-bfcl-7-0123456789abcdef0123.parquet",
    ]
    for name in planted:
        (steps_dir / name).write_bytes(b"stale")
    # resume: one finished part of bfcl-0 lost, as if the run had been interrupted
    (steps_dir / bfcl0[-1]).unlink()
    report = label(layout.for_partition("bfcl-0"), sandbox, chunk_size=60)
    after = snapshot()
    assert (report.parts_written, report.parts_reused) == (1, 1)
    assert report.steps == labels["bfcl-0"].steps
    assert not set(planted) & set(after)
    assert report.stale_parts_removed == len(planted)
    others = {n: t for n, t in before.items() if not n.startswith("part-bfcl-0-")}
    assert {n: after[n] for n in others} == others  # other partitions: same files, untouched
    # an idempotent re-run of another partition touches nothing at all
    again = label(layout.for_partition("builtin-1"), sandbox, chunk_size=60)
    assert again.parts_written == 0 and again.parts_reused >= 1 and snapshot() == after


def test_recollecting_a_partition_replaces_only_its_parts(sharded, sources, sandbox):
    layout, _, _ = sharded
    before = {p.name for p in layout.steps_dir.iterdir()}
    result = collect_all(
        sources, layout, sandbox, dataclasses.replace(EXPLORE, seed=7), shard=parse_shard("builtin-1", 2)
    )
    assert result.report.trajectories > 0
    report = label(layout.for_partition("builtin-1"), sandbox, chunk_size=60)
    after = {p.name for p in layout.steps_dir.iterdir()}
    assert report.parts_written >= 1 and report.stale_parts_removed >= 2
    assert {n for n in before if not n.startswith("part-builtin-1-")} == {
        n for n in after if not n.startswith("part-builtin-1-")
    }
    assert {n for n in before if n.startswith("part-builtin-1-")}.isdisjoint(after)
    assert verify_steps(layout.for_partition("builtin-1")).ok and verify_steps(layout).ok


def test_switching_partitioning_never_mixes_tables(tmp_path, sources, sandbox):
    cfg = sources_config(
        bfcl={"categories": [], "task_files": sources.sections["bfcl"].files()}, builtin={"enabled": False}
    )
    layout = catalogued(tmp_path, cfg)
    traj = layout.trajectories_dir
    collect_all(cfg, layout, sandbox, None)
    label(layout, sandbox)
    assert layout.trajectory_files() == [str(traj / "trajectories.parquet")]
    # partitioned: the unpartitioned table goes; the first partition's labeling drops the unpartitioned parts
    collect_all(cfg, layout, sandbox, None, shard=parse_shard("bfcl-1", 2))
    assert layout.trajectory_files() == [str(traj / "part-bfcl-1.parquet")]
    assert not (traj / "issues.parquet").exists() and json.loads((traj / "PARTITIONS.json").read_text())[
        "partitions"
    ] == partition_keys(2)
    label(layout.for_partition("bfcl-1"), sandbox)
    assert layout.step_parts() and all(step_part_partition(Path(p).name) == "bfcl-1" for p in layout.step_parts())
    collect_all(cfg, layout, sandbox, None, shard=parse_shard("bfcl-0", 2))
    assert len(layout.trajectory_files()) == 2  # same partitioning: the sibling stays
    # another N moves environments between shards: every file of the old partitioning goes
    collect_all(cfg, layout, sandbox, None, shard=parse_shard("bfcl-2", 3))
    assert layout.trajectory_files() == [str(traj / "part-bfcl-2.parquet")]
    label(layout.for_partition("bfcl-2"), sandbox)
    assert {step_part_partition(Path(p).name) for p in layout.step_parts()} == {
        "bfcl-2"
    }  # orphaned partitions' parts dropped
    # back to unpartitioned: partition files and the marker go
    collect_all(cfg, layout, sandbox, None)
    assert layout.trajectory_files() == [str(traj / "trajectories.parquet")]
    assert not list(traj.glob("issues-*")) and not (traj / "PARTITIONS.json").exists()
    label(layout, sandbox)
    assert all(step_part_partition(Path(p).name) is None for p in layout.step_parts())
    assert sum(pq.read_metadata(p).num_rows for p in layout.step_parts()) == 1142


# -- Dagster: definitions, executor, assets ------------------------------------------------------


def test_executor_comes_from_configuration(tmp_path):
    from dagster import in_process_executor

    from assets.executors import DEFAULT, FORKSERVER, _default, _forkserver, executor_for

    def executor_from(environ: dict[str, str]):
        return executor_for(Settings.from_env(environ))

    # Dagster's default (multiprocess, in-process selectable by run config), its steps forked from a forkserver
    assert executor_from({}) is DEFAULT and DEFAULT.name == "multi_or_in_process_executor"
    assert _default({"multiprocess": {}}) == {"multiprocess": {"start_method": FORKSERVER}}
    assert _default({"in_process": {}}) == {"in_process": {}}
    spawn = {"start_method": {"spawn": {}}, "max_concurrent": 2}  # a start method of the config's own is kept
    assert _default({"multiprocess": spawn}) == {"multiprocess": spawn} and _forkserver(spawn) == spawn
    assert executor_from({"ENVSIM_EXECUTOR": "in_process"}) is in_process_executor
    assert executor_from({"ENVSIM_EXECUTOR": "multiprocess", "ENVSIM_MAX_CONCURRENT": "3"}).name == "multiprocess"
    cfg = tmp_path / "executor.yaml"
    cfg.write_text("max_concurrent: 5\nretries: {enabled: {}}\n")
    assert executor_from({"ENVSIM_EXECUTOR_CONFIG": str(cfg)}).name == "multiprocess"
    assert executor_from({"ENVSIM_EXECUTOR_CONFIG": "{max_concurrent: 2}"}).name == "multiprocess"
    with pytest.raises(ValueError, match="must be one of multiprocess, in_process, celery, k8s"):
        executor_from({"ENVSIM_EXECUTOR": "ray"})
    with pytest.raises(ValueError, match="ENVSIM_MAX_CONCURRENT applies to the multiprocess and k8s executors"):
        executor_from({"ENVSIM_EXECUTOR": "in_process", "ENVSIM_MAX_CONCURRENT": "2"})
    for name, package in (("celery", "dagster-celery"), ("k8s", "dagster-k8s")):
        try:
            executor = executor_from({"ENVSIM_EXECUTOR": name})
        except ImportError as exc:
            assert f"needs the {package} package: pip install {package}" in str(exc)
            assert f".[{name}]" in str(exc)
        else:  # the extra is installed here
            assert executor.name == name


def test_sandbox_workers_default_comes_from_the_settings():
    from resources import SandboxResource
    from resources.sets import resources_for

    assert resources_for(Settings())["sandbox"].workers == max(1, os.cpu_count() or 1)
    assert (
        resources_for(Settings(sandbox_workers=3))["sandbox"].workers == 3 and SandboxResource(workers=1).workers == 1
    )
    assert resources_for(Settings(sandbox="trusted"))["sandbox"].isolation == "trusted"


def test_definitions_unchanged_without_envsim_shards():
    from assets.definitions import build_definitions

    defs = build_definitions(Settings())
    for key in ("trajectories", "labeled_steps"):
        assert defs.resolve_assets_def(key).partitions_def is None
    main = defs.resolve_job_def("envsim_main")
    assert main.partitions_def is None and main.executor_def.name == "multi_or_in_process_executor"
    assert {"trajectories", "labeled_steps", "step_strata"} <= {
        k.to_user_string() for k in main.asset_layer.executable_asset_keys
    }
    assert "collect_and_label" not in {j.name for j in defs.resolve_all_job_defs()}


def test_definitions_with_envsim_shards():
    """The partitioned shape, built in this process from a settings value (ENVSIM_SHARDS=2, in-process executor)."""
    from assets.definitions import build_definitions

    defs = build_definitions(Settings(shards=2, executor="in_process"))
    jobs = {}
    for name in ("envsim_main", "collect_and_label", "regenerate_splits"):
        job = defs.resolve_job_def(name)
        jobs[name] = {
            "partitions": job.partitions_def.get_partition_keys() if job.partitions_def else None,
            "assets": sorted(k.to_user_string() for k in job.asset_layer.executable_asset_keys),
            "checks": sorted(
                c.name
                for c in job.asset_layer.asset_graph.asset_check_keys
                if c.asset_key.to_user_string() in ("trajectories", "labeled_steps")
            ),
            "executor": job.executor_def.name,
        }
    descriptions = {
        k: next(iter(defs.resolve_assets_def(k).specs)).description for k in ("trajectories", "labeled_steps")
    }
    assert jobs["collect_and_label"]["partitions"] == partition_keys(2)
    assert jobs["collect_and_label"]["assets"] == ["labeled_steps", "trajectories"]
    assert jobs["collect_and_label"]["checks"] == [
        "delta_roundtrip",
        "outcome_labels_plausible",
        "relabel_is_deterministic",
        "step_table_expectations",
    ]
    assert jobs["envsim_main"]["partitions"] is None
    assert "trajectories" not in jobs["envsim_main"]["assets"] and {
        "environment_catalog",
        "step_strata",
        "simulator_eval",
    } <= set(jobs["envsim_main"]["assets"])
    assert jobs["regenerate_splits"]["assets"] == [
        "benchmark_dataset",
        "benchmark_split",
        "sft_dataset",
        "sft_mixture",
        "simulator_eval",
        "step_strata",
    ]
    assert {j["executor"] for j in jobs.values()} == {"in_process"}
    assert "ENVSIM_SHARDS=N" in descriptions["trajectories"] and "ENVSIM_SHARDS=N" in descriptions["labeled_steps"]
    # the process's own shape is untouched by building another one
    assert build_definitions(Settings()).resolve_assets_def("trajectories").partitions_def is None


def test_materializing_partitions_reports_partition_metadata(tmp_path):
    """The assets and checks materialized per partition with dagster.materialize (2 shards, in this process)."""
    from dagster import materialize

    from assets.collection import trajectories
    from assets.environments import environment_catalog
    from assets.labeling import delta_roundtrip, labeled_steps, relabel_is_deterministic, step_table_expectations
    from assets.partitions import partitioned, shards_partitions
    from resources import (
        CompositionResource,
        DataStoreResource,
        EnvironmentSourcesResource,
        RunPolicyResource,
        SandboxResource,
    )
    from tests.support.bad_tasks import bad_task_file

    files = [bad_task_file(tmp_path)]
    resources = {
        "store": DataStoreResource(data_root=str(tmp_path / "data")),
        "sources": EnvironmentSourcesResource(
            bfcl={"categories": [], "task_files": [dict(tasks=str(f.tasks), answers=str(f.answers)) for f in files]},
            builtin={"enabled": False},
        ),
        "sandbox": SandboxResource(workers=1, call_timeout_s=2),
        "composition": CompositionResource(),
        "run_policy": RunPolicyResource(),
    }
    assert materialize([environment_catalog], resources=resources).success
    shards = shards_partitions(2)
    data = {}
    for key in ("bfcl-0", "bfcl-1", "envscaler-1"):
        result = materialize(
            [
                partitioned(trajectories, shards),
                partitioned(labeled_steps, shards),
                delta_roundtrip,
                relabel_is_deterministic,
                step_table_expectations,
            ],
            resources=resources,
            partition_key=key,
            run_config={"ops": {"trajectories": {"config": {"enabled": False}}}},
        )
        assert result.success
        meta = {
            e.asset_key.to_user_string(): {
                k: getattr(v, "value", v) for k, v in e.event_specific_data.materialization.metadata.items()
            }
            for e in result.get_asset_materialization_events()
        }
        checks = {
            c.check_name: (c.passed, {k: getattr(v, "value", v) for k, v in c.metadata.items()})
            for c in result.get_asset_check_evaluations()
        }
        data[key] = {
            "partitions": [e.partition for e in result.get_asset_materialization_events()],
            "trajectories": {
                k: meta["trajectories"][k] for k in ("partition", "partition_note", "trajectories", "rejected_tasks")
            },
            "steps": {k: meta["labeled_steps"][k] for k in ("partition", "steps", "trajectories")},
            "checks": {n: [p, m.get("partition")] for n, (p, m) in checks.items()},
        }
    # good_math and hangs (MathAPI, MathAPI+TwitterAPI) hash to shard 0, good_tweets (TwitterAPI) to shard 1
    assert [data[k]["trajectories"]["trajectories"] for k in ("bfcl-0", "bfcl-1", "envscaler-1")] == [2, 1, 0]
    for key, d in data.items():
        assert d["partitions"] == [key, key]
        assert d["trajectories"]["partition"] == d["steps"]["partition"] == key
        assert d["steps"]["trajectories"] == d["trajectories"]["trajectories"]
        assert d["checks"] == {
            "delta_roundtrip": [True, key],
            "relabel_is_deterministic": [True, key],
            "step_table_expectations": [True, key],
        }
    # issues naming no environment (a line that is not JSON, an unknown tool, a syntax error) are bfcl-0's;
    # a reset that raises is the partition of its environment (load_raises: TwitterAPI, bfcl-1)
    assert [data[k]["trajectories"]["rejected_tasks"] for k in ("bfcl-0", "bfcl-1")] == [3, 1]
    assert data["bfcl-0"]["steps"]["steps"] + data["bfcl-1"]["steps"]["steps"] == 7
    assert data["envscaler-1"]["trajectories"]["partition_note"].startswith(
        "empty partition envscaler-1: no EnvScaler corpus configured"
    )
    assert data["envscaler-1"]["steps"]["steps"] == 0


# -- a real partitioned backfill through the Dagster daemon ----------------------------------------

LIGHT = {
    "resources": {"sandbox": {"config": {"workers": 1}}},
    "ops": {"labeled_steps_relabel_is_deterministic": {"config": {"sample_size": 4}}},
}
IN_PROCESS = {"execution": {"config": {"in_process": {}}}}  # the default executor takes either; no step subprocess


def _backfill_ticks(log: str, backfill_id: str) -> list[float]:
    """When the daemon looked at the backfill: the seconds of its log lines "Evaluating asset backfill <id>"."""
    line = re.compile(rf"(\d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d).* Evaluating asset backfill {backfill_id}\b")
    return sorted({datetime.fromisoformat(m.group(1)).timestamp() for m in line.finditer(log)})


@pytest.mark.slow
def test_partitioned_backfill_runs_every_partition_through_the_daemon(tmp_path):
    """`dagster dev` (webserver + daemon) with ENVSIM_SHARDS=2 and ENVSIM_PROFILE=small: the catalog, then
    an asset backfill of all 6 partitions of trajectories + labeled_steps (one run per partition, run
    side by side by the daemon), one partition re-materialized with the default multiprocess executor,
    and the unpartitioned step_strata on top of all partitions. The daemon looks at the backfill every few seconds
    (quick_backfills), so the test waits for the runs, not for Dagster's 30 s backfill loop."""
    srv = DagsterServer(
        tmp_path / "dagster_home",
        tmp_path / "data",
        tmp_path / "dagster.log",
        env={"ENVSIM_SHARDS": "2"},
        quick_backfills=True,
    )
    layout = DataLayout.at(tmp_path / "data")
    keys = partition_keys(2)
    try:
        srv.start()
        catalog = srv.launch("envsim_main", ["environment_catalog"], IN_PROCESS)
        assert srv.wait_run(catalog) == "SUCCESS", srv.log_tail()
        # the backfill's runs execute in-process to keep it short
        backfill = srv.launch_backfill(["trajectories", "labeled_steps"], {**LIGHT, **IN_PROCESS})
        assert srv.wait_backfill(backfill, timeout=420) == "COMPLETED_SUCCESS", srv.log_tail()
        ticks = _backfill_ticks(srv.log.read_text(), backfill)  # every few seconds (quick_backfills), not every 30
        assert len(ticks) >= 2 and min(b - a for a, b in zip(ticks, ticks[1:])) < 20, ticks
        runs = srv.backfill_runs(backfill)
        assert sorted(r["partition"] for r in runs) == keys
        assert all(r["status"] == "SUCCESS" and r["assets"] == ["labeled_steps", "trajectories"] for r in runs)
        spans = sorted((r["start"], r["end"]) for r in runs)
        assert any(b[0] < a[1] for a, b in zip(spans, spans[1:])), f"partition runs never overlapped: {spans}"

        stats = srv.graphql("""{ assetNodes(assetKeys: [{path: ["trajectories"]}, {path: ["labeled_steps"]}]) {
                               assetKey { path }
            assetPartitionStatuses { ... on DefaultPartitionStatuses { materializedPartitions failedPartitions } }
            assetMaterializations { partition metadataEntries { label ... on TextMetadataEntry { text }
                                                                ... on IntMetadataEntry { intValue } } } } }""")
        meta = {}
        for node in stats["assetNodes"]:
            asset = node["assetKey"]["path"][0]
            assert sorted(node["assetPartitionStatuses"]["materializedPartitions"]) == keys
            assert node["assetPartitionStatuses"]["failedPartitions"] == []
            for m in node["assetMaterializations"]:
                entries = {e["label"]: e.get("text", e.get("intValue")) for e in m["metadataEntries"]}
                assert entries["partition"] == m["partition"]
                meta[(asset, m["partition"])] = entries
        for key in keys:
            assert (layout.trajectories_dir / f"part-{key}.parquet").exists()
            assert meta[("trajectories", key)]["trajectories"] == meta[("labeled_steps", key)]["trajectories"]
            steps = sum(pq.read_metadata(p).num_rows for p in layout.for_partition(key).step_parts())
            assert steps == meta[("labeled_steps", key)]["steps"]
            assert (steps > 0) == (not key.startswith("envscaler")), key  # envscaler: nothing configured
        assert meta[("trajectories", "envscaler-0")]["partition_note"].startswith(
            "empty partition envscaler-0: no EnvScaler corpus"
        )

        # re-materialize one partition's labels with the default (multiprocess) executor: resumed, others untouched
        others = {
            p.name: p.stat().st_mtime_ns for p in layout.steps_dir.iterdir() if not p.name.startswith("part-bfcl-1-")
        }
        run = srv.launch(
            "collect_and_label", ["labeled_steps"], {"ops": LIGHT["ops"]}, tags={"dagster/partition": "bfcl-1"}
        )
        assert srv.wait_run(run) == "SUCCESS", srv.log_tail()
        materialized, checks, failures = srv.run_events(run)
        assert (
            materialized == {"labeled_steps"} and failures == [] and len(checks) == 4 and all(checks.values())
        )  # its four checks
        assert {
            p.name: p.stat().st_mtime_ns for p in layout.steps_dir.iterdir() if not p.name.startswith("part-bfcl-1-")
        } == others

        # the unpartitioned strata on top of every partition
        run = srv.launch("envsim_main", ["step_strata"], IN_PROCESS)
        assert srv.wait_run(run) == "SUCCESS", srv.log_tail()
        strata = pq.read_table(layout.strata, columns=["env_id"]).column("env_id").to_pylist()
        assert len(strata) == sum(meta[("labeled_steps", k)]["steps"] for k in keys)
        assert {shard_index(e, 2) for e in strata if e.startswith("bfcl/")} == {0, 1}
        assert {shard_index(e, 2) for e in strata if e.startswith("builtin/")} == {0, 1}
    finally:
        srv.stop()
        assert srv.processes_left() == [], f"processes left behind: {srv.processes_left()}"
