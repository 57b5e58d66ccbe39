"""Honest reports: the catalog lists and counts only enabled sources; the mixture explains its
decontamination losses per Balance2 group; every benchmark cell reports its distinct tools and the top
tool's share (selection metadata, manifest, step_strata cell table, summary)."""

import shutil
from pathlib import Path

import pytest
from dagster import materialize

from assets.environments import environment_catalog
from cli.summary import summary
from pipeline.collect.sources import SourceConfig, disabled_sources
from pipeline.core.strata import Cell
from pipeline.envs import builtin
from pipeline.envs.registry import sources_config
from pipeline.select.selection import build_benchmark, build_mixture
from pipeline.select.stratify import cell_table, stratify
from pipeline.store import queries
from pipeline.store.layout import DataLayout
from pipeline.store.versions import MIXTURE, SplitStore
from resources import DataStoreResource, EnvironmentSourcesResource
from tests.support.hub_corpus import write_hub_corpus
from tests.support.metadata import text


def _catalog(tmp_path, **sources):
    result = materialize(
        [environment_catalog],
        resources={
            "store": DataStoreResource(data_root=str(tmp_path / "data")),
            "sources": EnvironmentSourcesResource(**sources),
        },
    )
    assert result.success
    return result.get_asset_materialization_events()[0].event_specific_data.materialization.metadata


def test_catalog_does_not_count_disabled_sources(tmp_path):
    import pyarrow.parquet as pq

    envs, scenarios = write_hub_corpus(tmp_path / "corpus")
    corpus = [dict(env_items=str(envs), scenarios=str(scenarios[0]))]
    meta = _catalog(
        tmp_path / "a", builtin={"enabled": False}, bfcl={"categories": [], "replay": False}, envscaler=corpus
    )
    listed = pq.read_table(tmp_path / "a" / "data" / "environments.parquet").column("env_id").to_pylist()
    assert meta["environments"].value == 3 == len(listed) and all(e.startswith("envscaler/") for e in listed)
    assert "bfcl" in text(meta["disabled_sources"]) and "builtin.enabled: false" in text(meta["disabled_sources"])
    assert "bfcl" not in text(meta["by_source"]) and "builtin" not in text(meta["by_source"])
    # bfcl categories given but neither replayed nor explored: still disabled
    meta = _catalog(tmp_path / "b", bfcl={"replay": False, "explore": False}, envscaler=[])
    assert meta["environments"].value == len(builtin.parsed_items())
    assert "replay and explore are off (resources.sources.bfcl)" in text(meta["disabled_sources"])
    assert "no EnvScaler corpus" in text(meta["disabled_sources"])


def test_enabled_sources_rules():
    def bfcl_enabled(cfg):
        return "bfcl" not in disabled_sources(cfg)

    assert bfcl_enabled(sources_config())
    assert not bfcl_enabled(sources_config(bfcl={"categories": []}))
    assert not bfcl_enabled(sources_config(bfcl={"replay": False}))
    assert bfcl_enabled(sources_config(bfcl={"replay": False, "explore": True}))
    assert bfcl_enabled(
        sources_config(bfcl={"categories": []}, message_histories=[Path("h.jsonl")])
    )  # histories may name bfcl envs
    assert disabled_sources(sources_config()) == {
        "envscaler": "no EnvScaler corpus configured (resources.sources.envscaler is empty)"
    }


@pytest.fixture(scope="module")
def bfcl_copy(default_layout, tmp_path_factory):
    layout = DataLayout.at(tmp_path_factory.mktemp("honest") / "data")
    shutil.copytree(default_layout.root, layout.root)
    shutil.rmtree(layout.root / "splits", ignore_errors=True)
    stratify(layout)
    return layout


def test_benchmark_cells_report_tools_and_top_share(bfcl_copy, capsys):
    result = build_benchmark(bfcl_copy, seed=2, on_shortfall="warn")
    import pandas as pd

    df = pd.read_parquet(result.path, columns=["stratum", "env_id", "tool"])
    by = {t["stratum"]: t for t in result.tools}
    for stratum, group in df.groupby("stratum"):
        pairs = group.groupby(["env_id", "tool"]).size()
        assert by[stratum]["tool_pairs"] == len(pairs)
        assert by[stratum]["top_tool_share"] == round(pairs.max() / len(group), 3)
    manifest = SplitStore(bfcl_copy, "benchmark").manifest(result.version)
    assert manifest["tools"] == result.tools and manifest["spec"]["picking"]
    coverage = queries.cell_coverage(bfcl_copy).set_index("cell")
    assert {"tool_pairs", "top_tool", "top_tool_share"} <= set(coverage.columns) and "tools" not in coverage.columns
    assert (coverage.loc[coverage["candidates"] > 0, "top_tool_share"] > 0).all()
    cells = cell_table(bfcl_copy)
    assert (cells["tool_pairs"] >= 1).all() and cells["top_tool_share"].between(0, 1).all()
    summary(bfcl_copy)
    out = capsys.readouterr().out
    assert "top_tool_share" in out and by["no_change_args0"]["top_tool"] in out


def test_mixture_explains_decontamination_per_group(bfcl_copy, capsys):
    bench = build_benchmark(bfcl_copy, seed=2, on_shortfall="warn")
    mix = build_mixture(
        bfcl_copy,
        {"failure": 50, "no_change": 100_000, "simple": 50, "complex": 50},
        seed=2,
        benchmark_version=bench.version,
        on_shortfall="warn",
    )
    lost = {d["stratum"]: d for d in mix.decontamination}
    assert set(lost) == {"failure", "no_change", "simple", "complex"}
    for row in mix.strata:
        d = lost[row["stratum"]]
        assert d["before"] - d["removed_by_key"] - d["removed_by_hash"] == row["available"] == d["after"]
        assert d["key"] == "trajectory_id" and d["rule"] == "trajectory" and d["benchmark"] == bench.version
    assert lost["no_change"]["removed_by_key"] > 0
    message = mix.shortfall_message()
    assert "no_change" in message and "removed by trajectory_id decontamination against " + bench.version in message
    assert SplitStore(bfcl_copy, MIXTURE).manifest(mix.version)["decontamination"] == mix.decontamination
    summary(bfcl_copy)
    out = capsys.readouterr().out
    assert "removed_by_trajectory_id" in out and "removed_by_env_sample_hash" in out and "before_decontamination" in out


def test_mixture_warning_names_decontamination_when_a_group_is_emptied(bfcl_copy):
    """'complex: 0 of N, 0 candidates' is explained: every candidate was removed by decontamination."""
    bench = build_benchmark(
        bfcl_copy,
        [Cell("all_medium", "medium", 10_000, delta_min=3, delta_max=12)],
        seed=2,
        on_shortfall="warn",
        make_current=False,
    )
    mix = build_mixture(
        bfcl_copy,
        {"failure": 5, "no_change": 5, "simple": 5, "complex": 20},
        seed=2,
        benchmark_version=bench.version,
        on_shortfall="warn",
        make_current=False,
    )
    complex_ = next(s for s in mix.strata if s["stratum"] == "complex")
    assert complex_["available"] == 0 and complex_["selected"] == 0
    d = next(d for d in mix.decontamination if d["stratum"] == "complex")
    assert d["before"] > 0 and d["removed_by_key"] + d["removed_by_hash"] == d["before"]
    assert (
        f"complex: 0 of 20 (20 missing, 0 candidates; {d['removed_by_key']} of {d['before']} removed by trajectory_id"
        in mix.shortfall_message()
    )
