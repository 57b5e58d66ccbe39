"""The quality gate's assets (issue 35): `environment_report` and `environment_yield` materialize in Dagster with
table metadata, the gate's tables land in the `duckdb` resource's database, and both are in the default job."""

from __future__ import annotations

import pytest
from dagster import materialize

from assets.quality import environment_report, environment_yield
from resources import (
    CompositionResource,
    DataStoreResource,
    EnvironmentSourcesResource,
    RunPolicyResource,
)
from resources.storage import DataStoreDuckDBResource
from tests.support.defect_corpus import BAD, GOOD, shared_defect_layout


@pytest.fixture(scope="module")
def built(tmp_path_factory, sandbox):
    return shared_defect_layout(tmp_path_factory, "quality-assets")


def test_both_assets_materialize_with_table_metadata_and_duckdb_rows(built):
    layout, corpus = built
    resources = {
        "store": DataStoreResource(data_root=str(layout.root)),
        "duckdb": DataStoreDuckDBResource(store=DataStoreResource(data_root=str(layout.root))),
        "composition": CompositionResource(),
        "run_policy": RunPolicyResource(),
        "sources": EnvironmentSourcesResource(
            bfcl={"categories": [], "replay": False},
            builtin={"enabled": False},
            envscaler=[dict(env_items=str(corpus.env_items), scenarios=str(corpus.scenarios))],
        ),
    }
    result = materialize(
        [environment_report, environment_yield],
        resources=resources,
        run_config={"ops": {"environment_yield": {"config": {"probes_per_env": 6}}}},
    )
    assert result.success
    meta = {
        e.asset_key.to_user_string(): e.event_specific_data.materialization.metadata
        for e in result.get_asset_materialization_events()
    }
    report = meta["environment_report"]
    assert report["failing"].value == len(BAD) and report["environments"].value == len(BAD) + len(GOOD)
    worst = {r.data["env_id"]: r.data["main_problem"] for r in report["worst"].value.records}
    assert set(worst) == set(BAD) and all(worst.values())
    assert report["dagster/row_count"].value == len(BAD) + len(GOOD)
    columns = {c.name: c.description for c in report["dagster/column_schema"].value.columns}
    assert columns["verdict"] and columns["main_problem"]
    gate = meta["environment_yield"]
    checkers = {r.data["checker"]: r.data for r in gate["checkers"].value.records}
    assert checkers["oracle"]["yield"] == 1.0 and checkers["no_change"]["yield"] == 0.0
    assert gate["yield/oracle"].value == 1.0 and gate["accepted_environments"].value == len(GOOD)
    assert "oracle" in gate["card"].value
    from pipeline.store.duck import open_data_root

    with open_data_root(layout.root) as con:
        assert con.execute("SELECT count(DISTINCT checker) FROM env_yield").fetchone()[0] == 2
        assert con.execute("SELECT count(*) FROM env_quality WHERE verdict = 'fail'").fetchone()[0] == len(BAD)


def test_the_gate_runs_in_the_default_job():
    from assets.definitions import build_definitions
    from pipeline.core.settings import Settings

    job = build_definitions(Settings()).resolve_job_def("envsim_main")
    keys = {k.to_user_string() for k in job.asset_layer.executable_asset_keys}
    assert {"environment_report", "environment_yield"} <= keys
