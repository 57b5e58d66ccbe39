"""The determinism check can fail (issue 24, item 4) and quarantines instead of blocking (item 6).

A corpus in EnvScaler's format with good environments — one of them reads every frozen clock and entropy
source — and two whose tools return an object's address (``id(object())``, ``hash(repr(object()))``),
which no freeze can make reproducible. Every label is kept from collection (each call executed once), so
only a re-execution in fresh children, compared with the collected labels, can see the difference."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

from pipeline.collect.explore import ExploreSettings
from pipeline.collect.run import collect_all
from pipeline.collect.sources import EnvScalerCorpus, SourceConfig, env_items
from pipeline.envs.catalog import build_catalog
from pipeline.execution.child import Limits
from pipeline.execution.sandbox import Sandbox
from pipeline.labeling.determinism import check_determinism, failed_checks
from pipeline.labeling.steps import label
from pipeline.select.stratify import stratify
from pipeline.store.layout import DataLayout
from tests.envscaler_corpus import COUNTER_CODE

CLOCK_CODE = '''
import datetime, os, random, tempfile, time, uuid


class Stamper:
    """Stamps records with every clock and entropy source the sandbox freezes."""

    def __init__(self, init_config):
        self.records = {}

    def stamp(self, name: str):
        """Add a stamped record.

        Args:
            name (str): Record name.
        """
        self.records[str(uuid.uuid4())] = {
            "name": name, "at": datetime.datetime.now().isoformat(), "t": time.time(),
            "rt": time.clock_gettime(time.CLOCK_REALTIME), "mono": time.clock_gettime(time.CLOCK_MONOTONIC),
            "cpu": time.process_time(), "thread": time.thread_time(), "times": list(os.times()),
            "uptime": open("/proc/uptime").read(), "r": random.Random().random(), "gr": os.getrandom(4).hex(),
            "tmp": os.path.basename(tempfile.mktemp()),
        }
        return {"success": True, "data": len(self.records)}
'''

ADDRESS_CODE = '''
class {cls}:
    """Remembers a fresh object's address (different in every process)."""

    def __init__(self, init_config):
        self.tags = []

    def tag(self, label: str):
        """Tag with a fresh token.

        Args:
            label (str): Tag label.
        """
        self.tags.append({{"label": label, "token": {expr}}})
        return {{"success": True, "data": self.tags[-1]["token"]}}
'''


def _item(cls: str, code: str) -> dict:
    return {"env_class_name": cls, "env_class_code": code, "environment_introduction": cls, "constraints_rules": ""}


ITEMS = {
    "good_shop": _item("CounterShop", COUNTER_CODE),
    "good_clock": _item("Stamper", CLOCK_CODE),
    "addr_id": _item("IdTagger", ADDRESS_CODE.format(cls="IdTagger", expr="id(object())")),
    "addr_repr": _item("ReprTagger", ADDRESS_CODE.format(cls="ReprTagger", expr="hash(repr(object()))")),
}
BAD = ["envscaler/addr_id", "envscaler/addr_repr"]
GOOD = ["envscaler/good_clock", "envscaler/good_shop"]


def write_corpus(directory: Path) -> tuple[Path, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    scenarios = [{"task_id": f"{env}-{i}", "env_id": env, "env_class_name": item["env_class_name"],
                  "init_config": {"stock": {"apple": 5 + i, "pear": 2}, "till": 0} if env == "good_shop" else {},
                  "task": "Do things."}
                 for env, item in ITEMS.items() for i in range(3)]
    envs, scen = directory / "191_env_metadata.json", directory / "scenarios.json"
    envs.write_text(json.dumps(ITEMS))
    scen.write_text(json.dumps(scenarios))
    return envs, scen


def corpus_config(directory: Path) -> SourceConfig:
    envs, scen = write_corpus(directory)
    return SourceConfig(bfcl_files=[], bfcl_replay=False, builtin=False, envscaler=[EnvScalerCorpus(envs, scen)])


EXPLORE = ExploreSettings(seed=5, call_budget=120, batch_episodes=8, min_envs=1, episode_length=5, mutate_rate=0.1)


@pytest.fixture(scope="module")
def collected(tmp_path_factory, sandbox):
    """Collected and labeled: every label kept from collection."""
    tmp = tmp_path_factory.mktemp("det")
    cfg = corpus_config(tmp / "corpus")
    layout = DataLayout.at(tmp / "data")
    items, issues = env_items(cfg)
    build_catalog(layout, items, issues, bfcl=False)
    collect_all(cfg, layout, sandbox, EXPLORE)
    report = label(layout, sandbox)
    assert report.prelabeled == report.trajectories > 0  # nothing re-executed at labeling
    envs = {r[0] for r in duckdb.sql(f"SELECT DISTINCT env_id FROM read_parquet({layout.step_parts()!r})").fetchall()}
    assert envs == set(GOOD + BAD), envs
    return layout


def _check(layout: DataLayout, **kwargs):
    # a sandbox of its own, as the asset check opens one: other worker processes, other addresses
    with Sandbox(workers=2, limits=Limits(call_timeout_s=10)) as box:
        return check_determinism(layout, box, **kwargs)


def test_one_trajectory_per_environment_is_re_executed_and_address_readers_are_caught(collected):
    """No extra sample: the per-environment re-execution alone re-runs labels kept from collection,
    compares them with values of an independent execution, and names exactly the two address readers."""
    report = _check(collected, sample_size=0)
    per_env = {}
    for traj in report.sampled:
        per_env.setdefault("/".join(traj.split("/")[:2]), []).append(traj)
    assert sorted(per_env) == sorted(GOOD + BAD) and all(len(v) == 1 for v in per_env.values())
    assert report.steps_compared > 0
    assert report.explored_compared == 0  # labels kept from collection are not compared with themselves
    assert not report.ok
    assert report.environments() == BAD, report.mismatches
    assert "good_clock" not in " ".join(report.mismatches)  # every frozen source reproduced


def test_quarantine_excludes_the_whole_environment_and_the_others_reach_the_strata(collected):
    report = _check(collected, sample_size=0)
    assert report.quarantined() == BAD
    stratify(collected)
    strata = pq.read_table(collected.strata).to_pylist()
    for row in strata:
        if row["env_id"] in BAD:
            assert row["excluded"] and "non-deterministic" in row["excluded_reason"], row
    assert {r["env_id"] for r in strata if not r["excluded"]} == set(GOOD)
    [doc] = [d for d in failed_checks(collected) if d["check"] == "relabel_is_deterministic"]
    assert doc["environments"] == BAD and doc["quarantined"] and not doc["strict"]
    assert all(env in doc["headline"] for env in BAD) and "quarantined" in doc["headline"]
