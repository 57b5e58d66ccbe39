"""EnvScaler's Hub release end to end: loader (both formats, bounded errors), download through the local
Hub stand-in, and the real pipeline run twice — frozen clock, seeded ids, typed exploration — with
identical step parts and split versions; a non-deterministic environment is caught by the determinism
check and quarantined."""

import dataclasses
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pipeline.collect.explore import ExploreSettings
from pipeline.collect.run import collect_all
from pipeline.collect.sources import SourceConfig, env_items
from pipeline.core.issues import TaskIssue
from pipeline.core.strata import Cell
from pipeline.envs import envscaler, registry
from pipeline.envs.catalog import build_catalog
from pipeline.envs.config import EnvScalerCorpus
from pipeline.envs.download import download_envscaler, downloaded_corpus
from pipeline.envs.registry import sources_config
from pipeline.labeling.determinism import check_determinism
from pipeline.labeling.steps import label
from pipeline.select.selection import build_benchmark
from pipeline.select.stratify import exclusion_table, stratify
from pipeline.store.layout import DataLayout
from pipeline.store.reconstruct import verify_steps
from tests.support.fake_hub import FakeHub
from tests.support.hub_corpus import hub_files, write_dict_corpus, write_hub_corpus


def _items(path):
    return [r for r in envscaler.load_env_items(path)]


def test_hub_format_and_dict_format_load_identically(tmp_path):
    hub_envs, hub_scenarios = write_hub_corpus(tmp_path / "hub")
    dict_envs, dict_scenarios = write_dict_corpus(tmp_path / "dict")
    a = sorted(_items(hub_envs), key=lambda i: i.env_id)
    b = sorted(_items(dict_envs), key=lambda i: i.env_id)
    assert all(isinstance(i, envscaler.EnvItem) for i in a + b), [i for i in a + b if isinstance(i, TaskIssue)]
    strip = lambda i: dataclasses.replace(i, origin="")
    assert [strip(i) for i in a] == [strip(i) for i in b]
    assert {i.env_id: i.tools_derived for i in a} == {"env_1_sft": False, "env_2_rl": False, "env_3_sft": True}
    sa = sorted((s for p in hub_scenarios for s in envscaler.load_scenarios(p)), key=lambda s: s.task_id)
    sb = sorted(envscaler.load_scenarios(dict_scenarios), key=lambda s: s.task_id)
    assert [(s.task_id, s.env_id, s.init_config, s.task, s.checklist) for s in sa] == [
        (s.task_id, s.env_id, s.init_config, s.task, s.checklist) for s in sb
    ]
    assert sa[0].init_config["accounts"]["ACC-1"]["balance"] == 100


def test_bad_records_give_bounded_errors_naming_the_record(tmp_path):
    huge = "x" * 700_000
    records = [
        {
            "env_id": "env_bad_tools",
            "env_class_name": "A",
            "env_class_code": "class A:\n    def f(self):\n        return 1\n",
            "tools": "[{not json" + huge,
        },
        {
            "env_id": "env_tools_type",
            "env_class_name": "A",
            "env_class_code": "class A:\n    def f(self):\n        return 1\n",
            "tools": 12345,
        },
        {
            "env_id": "env_no_class",
            "env_class_name": "Ghost",
            "env_class_code": "class " + "B" * 100_000 + ":\n    pass\n",
        },
    ]
    path = tmp_path / "envs.json"
    path.write_text(json.dumps(records))
    issues = [r for r in envscaler.load_env_items(path)]
    assert all(isinstance(i, TaskIssue) for i in issues)
    assert [i.task_id for i in issues] == ["env_bad_tools", "env_tools_type", "env_no_class"]
    assert all(len(i.reason) < 1500 for i in issues), [len(i.reason) for i in issues]
    assert "'tools' is a string but not JSON" in issues[0].reason
    assert "'tools' is a int" in issues[1].reason
    scen = tmp_path / "sc.json"
    scen.write_text(json.dumps([{"task_id": "t1", "env_id": "e", "init_config": "{broken" + huge}]))
    [issue] = list(envscaler.load_scenarios(scen))
    assert (
        issue.task_id == "t1" and "'init_config' is a string but not JSON" in issue.reason and len(issue.reason) < 500
    )


def test_download_through_the_hub_client(tmp_path):
    files = hub_files()
    with FakeHub() as hub:
        hub.add_dataset(
            "XXHStudyHard/EnvScaler-191-Env",
            {"EnvScaler-191-Env.json": json.dumps(files["envs"]).encode(), "README.md": b"---\nlicense: mit\n---\n"},
        )
        hub.add_dataset(
            "XXHStudyHard/EnvScaler-RL-Scenario", {"EnvScaler-RL-Scenario.json": json.dumps(files["rl"]).encode()}
        )
        hub.add_dataset(
            "XXHStudyHard/EnvScaler-SFT-Scenario",
            {"data/train.jsonl": "".join(json.dumps(r) + "\n" for r in files["sft"]).encode()},
        )
        result = download_envscaler(tmp_path / "data", endpoint=hub.url)
        assert any(m == "HEAD" and "/resolve/" in p for m, p in hub.log)
    assert result.env_items.read_bytes() == json.dumps(files["envs"]).encode()
    assert [p.name for p in result.scenarios] == ["EnvScaler-RL-Scenario.json", "train.jsonl"]
    corpus = downloaded_corpus(tmp_path / "data")
    assert corpus["env_items"] == str(result.env_items)
    cfg = sources_config(
        bfcl={"categories": []},
        builtin={"enabled": False},
        envscaler=[
            EnvScalerCorpus(
                Path(corpus["env_items"]),
                Path(corpus["scenarios"][0]),
                more_scenarios=tuple(Path(p) for p in corpus["scenarios"][1:]),
            )
        ],
    )
    items, issues = env_items(cfg)
    assert len(items) == 3 and not issues
    # the run's sources resource: an unset `envscaler` is this download (the source completes it from the data
    # root); a list given, even an empty one, is taken as it is
    from resources import EnvironmentSourcesResource

    layout = DataLayout.at(tmp_path / "data")
    unset = EnvironmentSourcesResource(builtin={"enabled": False}, bfcl={"categories": []}).config(layout)
    downloaded = [dataclasses.replace(c, license=corpus["license"]) for c in cfg.of(registry.get("envscaler"))]
    assert unset.of(registry.get("envscaler")) == downloaded and corpus["license"]
    assert EnvironmentSourcesResource(envscaler=[]).config(layout).of(registry.get("envscaler")) == []
    elsewhere = EnvironmentSourcesResource().config(DataLayout.at(tmp_path / "empty"))
    assert elsewhere.of(registry.get("envscaler")) == []


def _run(root: Path, corpus: tuple[Path, list[Path]], sandbox, budget: int = 240):
    layout = DataLayout.at(root)
    envs, scenarios = corpus
    cfg = sources_config(
        bfcl={"categories": [], "replay": False},
        builtin={"enabled": False},
        envscaler=[EnvScalerCorpus(envs, scenarios[0], more_scenarios=tuple(scenarios[1:]))],
    )
    items, issues = env_items(cfg)
    build_catalog(layout, items, issues)
    result = collect_all(
        cfg,
        layout,
        sandbox,
        ExploreSettings(seed=7, call_budget=budget, batch_episodes=8, min_envs=1, episode_length=8, mutate_rate=0.3),
    )
    label(layout, sandbox)
    determinism = check_determinism(layout, sandbox, sample_size=-1)
    return layout, result, determinism


def _parts(layout: DataLayout) -> dict[str, bytes]:
    """Every step part's bytes (timings live in the parts' sidecars, so the parts are byte-identical)."""
    return {Path(p).name: Path(p).read_bytes() for p in layout.step_parts()}


COMPOSITION = [
    Cell("fail", "failure", 3, outcome="failure"),
    Cell("read", "no_change", 3, args_count=1),
    Cell("write", "simple", 3, delta_min=1, delta_max=12),
]


def test_hub_corpus_runs_twice_identically(tmp_path, sandbox):
    corpus = write_hub_corpus(tmp_path / "corpus")
    first, result, det1 = _run(tmp_path / "a", corpus, sandbox)
    second, _, det2 = _run(tmp_path / "b", corpus, sandbox)
    assert det1.ok and det2.ok, det1.mismatches + det2.mismatches
    # every trajectory re-executed (sample_size=-1) against the labels kept from collection; those labels
    # are exploration's own observations, so they are not also compared with themselves
    assert det1.steps_compared > 100 and det1.explored_compared == 0
    assert result.without_scenarios == result.explored_without == ["envscaler/env_3_sft"]  # from its class defaults
    assert _parts(first) == _parts(second)  # same part names (content keys), byte-identical files
    steps = [s for p in first.step_parts() for s in pq.read_table(p).to_pylist()]
    assert {s["env_id"] for s in steps} == {"envscaler/env_1_sft", "envscaler/env_2_rl", "envscaler/env_3_sft"}
    assert not [s for s in steps if s["error_type"] == "TypeError"]  # typed arguments, unions included
    # the frozen clock and seeded ids are in the labels, and they differ between trajectories
    added = [
        json.loads(d["after"])
        for s in steps
        if s["tool"] == "add_entry" and s["outcome"] == "success"
        for d in s["delta"]
        if d["op"] == "add" and d["path"][0] == "entries"
    ]
    assert len(added) > 5 and len({e["ref"] for e in added}) > 1
    assert all(e["booked_at"].startswith("2025-") for e in added)
    assert verify_steps(first).ok
    stratify(first), stratify(second)
    a = build_benchmark(first, COMPOSITION, seed=3, on_shortfall="warn")
    b = build_benchmark(second, COMPOSITION, seed=3, on_shortfall="warn")
    assert a.version == b.version
    assert (first.root / "splits").exists()


def test_nondeterministic_environment_fails_the_check_and_is_quarantined(tmp_path, sandbox):
    corpus = write_hub_corpus(tmp_path / "corpus", nondeterministic=True)
    layout, _, report = _run(tmp_path / "run", corpus, sandbox, budget=40)
    assert not report.ok
    assert report.quarantined() == ["envscaler/env_9_rl"]
    assert "NON-DETERMINISTIC" in report.headline() and "envscaler/env_9_rl" in report.headline()
    assert report.by_env()["envscaler/env_9_rl"] == len(report.excluded) > 0
    assert report.quarantined() == ["envscaler/env_9_rl"] and "quarantined" in report.headline()
    stratify(layout)
    table = exclusion_table(layout)
    assert table[table["reason"] == "non-deterministic"]["steps"].sum() == len(report.excluded)
    import duckdb

    reasons = duckdb.sql(f"SELECT DISTINCT excluded_reason FROM '{layout.strata}' WHERE excluded").fetchall()
    # exploration's labels are kept (each call executed once), so the difference shows on re-execution
    assert any(r[0].startswith("non-deterministic: ") and "differ" in r[0] for r in reasons), reasons


@pytest.mark.slow
@pytest.mark.parametrize("strict", [False, True])
def test_forge_run_quarantines_the_nondeterministic_environment(tmp_path, strict):
    """``./forge run`` names the environment and exits 0 (quarantined: the good environments' steps make the
    splits); with ENVSIM_STRICT=1 it fails. (A corpus of only that environment would leave no usable step:
    the benchmark split then fails the run.)"""
    import os
    import subprocess

    envs, scenarios = write_hub_corpus(tmp_path / "corpus", nondeterministic=True, mixed=True)
    config = tmp_path / "run.yaml"
    config.write_text(
        json.dumps(
            {  # YAML is a superset of JSON
                "resources": {
                    "sources": {
                        "config": {
                            "builtin": {"enabled": False},
                            "bfcl": {"categories": [], "replay": False},
                            "envscaler": [
                                {
                                    "env_items": str(envs),
                                    "scenarios": str(scenarios[0]),
                                    "more_scenarios": [str(p) for p in scenarios[1:]],
                                }
                            ],
                        }
                    },
                    # a small benchmark, so that the mixture (decontaminated by task) keeps samples of this small corpus
                    "composition": {
                        "config": {
                            "cells": [{"name": "write", "group": "simple", "quota": 2, "delta_min": 1, "delta_max": 12}]
                        }
                    },
                },
                "ops": {"trajectories": {"config": {"call_budget": 160, "min_envs": 1}}},
            }
        )
    )
    root = Path(__file__).resolve().parents[2]
    env = {
        **os.environ,
        "ENVSIM_DATA_ROOT": str(tmp_path / "data"),
        "DAGSTER_HOME": str(tmp_path / "home"),
        "ENVSIM_PROFILE": "small",
        "ENVSIM_STRICT": "1" if strict else "",
    }
    proc = subprocess.run(
        [str(root / "forge"), "run", "-c", str(config)], cwd=root, env=env, capture_output=True, text=True, timeout=900
    )
    out = proc.stdout + proc.stderr
    assert (proc.returncode != 0) is strict, out[-3000:]
    assert "relabel_is_deterministic" in out and "envscaler/env_9_rl" in out, out[-3000:]
    verdict = "FAILED CHECK" if strict else "QUARANTINED BY CHECK"
    assert (
        f"{verdict} relabel_is_deterministic: NON-DETERMINISTIC labels in 1 environment(s): envscaler/env_9_rl"
        in proc.stderr
    )
    assert "quarantined envscaler/env_9_rl: " in proc.stderr
