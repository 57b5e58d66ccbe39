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
from pipeline.collect.sources import SourceConfig, env_items
from pipeline.envs.catalog import build_catalog
from pipeline.envs.config import EnvScalerCorpus
from pipeline.envs.registry import sources_config
from pipeline.execution.child import Limits
from pipeline.execution.sandbox import Sandbox
from pipeline.labeling.determinism import check_determinism, kept_determinism
from pipeline.labeling.quarantine import failed_checks
from pipeline.labeling.steps import label
from pipeline.select.stratify import stratify
from pipeline.store.layout import DataLayout
from tests.support.envscaler_corpus import COUNTER_CODE
from tests.support.metadata import text

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


DAY_CODE = """
import ctypes, datetime


class DayReader:
    \"\"\"Records the host's real day, read by a raw system call below the frozen clock: the same all day long.\"\"\"

    def __init__(self, init_config):
        self.days = []

    def today(self, note: str):
        \"\"\"Record today's date.

        Args:
            note (str): A note.
        \"\"\"
        ts = (ctypes.c_long * 2)()
        ctypes.CDLL(None).syscall(228, 0, ts)  # clock_gettime(CLOCK_REALTIME), x86_64, past libc's frozen one
        day = datetime.datetime.fromtimestamp(ts[0], datetime.timezone.utc).date().isoformat()
        self.days.append(day)
        return {"success": True, "data": day}
"""


def _item(cls: str, code: str) -> dict:
    return {"env_class_name": cls, "env_class_code": code, "environment_introduction": cls, "constraints_rules": ""}


ITEMS = {
    "good_shop": _item("CounterShop", COUNTER_CODE),
    "good_clock": _item("Stamper", CLOCK_CODE),
    "addr_id": _item("IdTagger", ADDRESS_CODE.format(cls="IdTagger", expr="id(object())")),
    "addr_repr": _item("ReprTagger", ADDRESS_CODE.format(cls="ReprTagger", expr="hash(repr(object()))")),
    "day_reader": _item("DayReader", DAY_CODE),
}
BAD = ["envscaler/addr_id", "envscaler/addr_repr", "envscaler/day_reader"]
GOOD = ["envscaler/good_clock", "envscaler/good_shop"]


def write_corpus(directory: Path) -> tuple[Path, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    scenarios = [
        {
            "task_id": f"{env}-{i}",
            "env_id": env,
            "env_class_name": item["env_class_name"],
            "init_config": {"stock": {"apple": 5 + i, "pear": 2}, "till": 0} if env == "good_shop" else {},
            "task": "Do things.",
        }
        for env, item in ITEMS.items()
        for i in range(3)
    ]
    envs, scen = directory / "191_env_metadata.json", directory / "scenarios.json"
    envs.write_text(json.dumps(ITEMS))
    scen.write_text(json.dumps(scenarios))
    return envs, scen


def corpus_config(directory: Path) -> SourceConfig:
    envs, scen = write_corpus(directory)
    return sources_config(
        bfcl={"categories": [], "replay": False}, builtin={"enabled": False}, envscaler=[EnvScalerCorpus(envs, scen)]
    )


EXPLORE = ExploreSettings(seed=5, call_budget=120, batch_episodes=8, min_envs=1, episode_length=5, mutate_rate=0.1)


@pytest.fixture(scope="module")
def collected(tmp_path_factory, sandbox):
    """Collected and labeled: every label kept from collection."""
    tmp = tmp_path_factory.mktemp("det")
    cfg = corpus_config(tmp / "corpus")
    layout = DataLayout.at(tmp / "data")
    items, issues = env_items(cfg)
    build_catalog(layout, items, issues, disabled=("bfcl",))
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
    assert report.quarantined() == BAD, report.mismatches
    assert "good_clock" not in " ".join(report.mismatches)  # every frozen source reproduced
    # the real day read past the frozen clock is the same on re-execution, and caught by its value
    [day] = [m for m in report.mismatches if m.startswith("envscaler/day_reader")]
    assert "holds the host's real date" in day, day


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


def test_a_repeated_check_on_the_same_labels_reads_the_last_verdict_and_starts_no_sandbox(collected):
    """What a resumed run does: the second check with the same labels, catalog, code and settings reads the first's
    report (its findings file still there) without executing anything; without the findings file, or with other
    settings, it executes again."""

    def check(**kwargs):
        with Sandbox(workers=2, limits=Limits(call_timeout_s=10), lazy=True) as box:
            return kept_determinism(collected, box, **kwargs), box.instances_started

    first, started = check(sample_size=0)
    assert started > 0 and first.kept_from is None and first.quarantined() == BAD
    again, started = check(sample_size=0)
    assert started == 0 and again.kept_from is not None
    assert (again.quarantined(), again.mismatches, again.excluded) == (
        first.quarantined(),
        first.mismatches,
        first.excluded,
    )
    assert again.facts()["checked"].startswith("before, on the same labels and code")
    first.path.unlink()  # the findings the quarantine reads are gone: executed again, and written again
    redone, started = check(sample_size=0)
    assert started > 0 and redone.kept_from is None and redone.path.is_file()
    other, started = check(sample_size=1)  # other settings: another verdict
    assert started > 0 and other.kept_from is None and len(other.sampled) == len(first.sampled) + 1


def _materialize(tmp_path: Path, strict: bool):
    from dagster import materialize
    from dagster_duckdb import DuckDBResource

    from assets.collection import trajectories
    from assets.environments import environment_catalog
    from assets.labeling import delta_roundtrip, labeled_steps, relabel_is_deterministic
    from assets.selection import benchmark_split, step_strata
    from resources import (
        CompositionResource,
        DataStoreResource,
        EnvironmentSourcesResource,
        RunPolicyResource,
        SandboxResource,
    )

    envs, scen = write_corpus(tmp_path / "corpus")
    root = tmp_path / "data"
    resources = {
        "store": DataStoreResource(data_root=str(root)),
        "sources": EnvironmentSourcesResource(
            bfcl={"categories": [], "replay": False},
            builtin={"enabled": False},
            envscaler=[dict(env_items=str(envs), scenarios=str(scen))],
        ),
        "sandbox": SandboxResource(workers=2, call_timeout_s=10),
        "composition": CompositionResource(),
        "run_policy": RunPolicyResource(),
        "duckdb": DuckDBResource(database=str(root / "envsim.duckdb")),
    }
    explore = {
        "seed": EXPLORE.seed,
        "call_budget": EXPLORE.call_budget,
        "batch_episodes": EXPLORE.batch_episodes,
        "min_envs": 1,
        "episode_length": EXPLORE.episode_length,
        "mutate_rate": EXPLORE.mutate_rate,
    }
    run_config = {
        "ops": {
            "trajectories": {"config": explore},
            "labeled_steps_relabel_is_deterministic": {"config": {"sample_size": 0, "strict": strict}},
            "benchmark_split": {"config": {"on_shortfall": "warn"}},
        }
    }
    result = materialize(
        [
            environment_catalog,
            trajectories,
            labeled_steps,
            delta_roundtrip,
            relabel_is_deterministic,
            step_strata,
            benchmark_split,
        ],
        resources=resources,
        run_config=run_config,
        raise_on_error=False,
    )
    return DataLayout.at(root), result


def test_two_nondeterministic_environments_do_not_block_the_others_splits(tmp_path, monkeypatch):
    """The check fails with severity WARN naming both environments; step_strata and the benchmark split
    still materialize, with the good environments' steps only; the run summary names them and exits 0."""
    from dagster import AssetCheckSeverity

    from cli.summary import summary

    layout, result = _materialize(tmp_path, strict=False)
    assert result.success
    [check] = [e for e in result.get_asset_check_evaluations() if e.check_name == "relabel_is_deterministic"]
    assert not check.passed and check.severity == AssetCheckSeverity.WARN
    quarantined = text(check.metadata["quarantined_environments"])
    assert all(env in quarantined for env in BAD) and not any(env in quarantined for env in GOOD)
    assert check.metadata["strict"].value is False
    mats = {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()}
    assert {"step_strata", "benchmark_split"} <= mats
    from pipeline.store.versions import BENCHMARK, SplitStore

    store = SplitStore(layout, BENCHMARK)
    members = pq.read_table(store.samples(store.current())).column("env_id").to_pylist()
    assert members and set(members) <= set(GOOD), set(members)

    import contextlib
    import io

    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        code = summary(layout)
    assert code == 0, err.getvalue()
    assert "QUARANTINED BY CHECK relabel_is_deterministic" in err.getvalue()
    for env in BAD:
        assert f"quarantined {env}: " in err.getvalue()
    monkeypatch.setenv("ENVSIM_STRICT", "1")  # the setting makes the same findings fail the summary
    with contextlib.redirect_stderr(io.StringIO()) as err, contextlib.redirect_stdout(io.StringIO()):
        assert summary(layout) == 2
    assert "FAILED CHECK relabel_is_deterministic" in err.getvalue()


def test_strict_setting_parses():
    from pipeline.core.settings import Settings, SettingsError

    assert Settings.from_env({}).strict is False
    assert Settings.from_env({"ENVSIM_STRICT": "1"}).strict is True
    assert Settings.from_env({"ENVSIM_STRICT": "off"}).strict is False
    with pytest.raises(SettingsError, match="ENVSIM_STRICT"):
        Settings.from_env({"ENVSIM_STRICT": "maybe"})


def test_strict_makes_the_quarantine_blocking(tmp_path, monkeypatch):
    from dagster import AssetCheckSeverity

    from cli.summary import summary

    layout, result = _materialize(tmp_path, strict=True)
    assert not result.success
    [check] = [e for e in result.get_asset_check_evaluations() if e.check_name == "relabel_is_deterministic"]
    assert not check.passed and check.severity == AssetCheckSeverity.ERROR
    mats = {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()}
    assert "step_strata" not in mats and "benchmark_split" not in mats
    assert summary(layout) == 2
    doc = next(d for d in failed_checks(layout) if d["check"] == "relabel_is_deterministic")
    assert doc["strict"] is True
