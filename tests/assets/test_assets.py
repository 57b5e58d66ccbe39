"""The Dagster assets and checks, materialized for real with dagster.materialize()."""

from dagster import MarkdownMetadataValue, TableMetadataValue, materialize

from assets.collection import trajectories
from assets.environments import environment_catalog
from assets.labeling import delta_roundtrip, labeled_steps, relabel_is_deterministic
from pipeline.store import catalog
from resources import (
    CompositionResource,
    DataStoreResource,
    EnvironmentSourcesResource,
    RunPolicyResource,
    SandboxResource,
)
from tests.support.bad_tasks import bad_task_file
from tests.support.metadata import text


def assert_real_tables(metadata: dict) -> None:
    """No Markdown pipe table anywhere: every tabular summary is table metadata with a column schema."""
    for key, value in metadata.items():
        if isinstance(value, MarkdownMetadataValue):
            assert "|---" not in value.value and "|:--" not in value.value and "| ---" not in value.value, key
        if isinstance(value, TableMetadataValue):
            assert value.schema.columns and all(c.type for c in value.schema.columns), key


def test_materialize_reports_bad_input_in_metadata_and_checks_pass(tmp_path):
    files = [bad_task_file(tmp_path)]
    resources = {
        "store": DataStoreResource(data_root=str(tmp_path / "data")),
        "sources": EnvironmentSourcesResource(
            bfcl={"categories": [], "task_files": [dict(tasks=str(f.tasks), answers=str(f.answers)) for f in files]},
            builtin={"enabled": False},
        ),
        "sandbox": SandboxResource(workers=2, call_timeout_s=2),
        "composition": CompositionResource(),
        "run_policy": RunPolicyResource(),
    }
    result = materialize(
        [environment_catalog, trajectories, labeled_steps, delta_roundtrip, relabel_is_deterministic],
        resources=resources,
        run_config={"ops": {"trajectories": {"config": {"enabled": False}}}},
    )
    assert result.success
    mats = {
        e.asset_key.to_user_string(): e.event_specific_data.materialization.metadata
        for e in result.get_asset_materialization_events()
    }
    assert mats["environment_catalog"]["environments"].value == 8
    traj = mats["trajectories"]
    assert traj["trajectories"].value == 3 and traj["rejected_tasks"].value == 4
    assert "unknown_tool" in text(traj["rejected"]) and "load_raises" in text(traj["rejected"])
    assert traj["agent"].value.startswith("skipped: no model endpoint configured")
    steps = mats["labeled_steps"]
    assert steps["steps"].value == 7
    table = steps["delta_by_outcome"]
    assert [c.name for c in table.schema.columns][:2] == ["delta_size", "success"]
    assert table.records[-1].data["delta_size"] == "total" and table.records[-1].data["total"] == 7
    assert "square_root" in text(steps["issues"])
    assert steps["dagster/row_count"].value == 7
    assert {"step_id", "delta_size", "outcome"} <= {c.name for c in steps["dagster/column_schema"].schema.columns}
    # the UI's Columns table: every column of every Parquet-backed asset described, in the glossary's words
    for asset, metadata in mats.items():
        if "dagster/column_schema" in metadata:
            for column in metadata["dagster/column_schema"].schema.columns:
                assert column.description and column.description == catalog.COLUMNS[column.name], (asset, column.name)
    described = {c.name: c.description for c in steps["dagster/column_schema"].schema.columns}
    assert (
        "`success`, `failure`, `error` or `sandbox_refused`" in described["outcome"]
        and "`builtin`" in described["source"]
    )
    assert traj["dagster/row_count"].value == 3 and mats["environment_catalog"]["dagster/row_count"].value == 8
    for metadata in mats.values():
        assert_real_tables(metadata)
    checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert checks == {"delta_roundtrip": True, "relabel_is_deterministic": True}

    # a second run is idempotent: every part is reused
    again = materialize([labeled_steps], resources=resources)
    meta = again.get_asset_materialization_events()[0].event_specific_data.materialization.metadata
    assert meta["parts_reused"].value == 1 and meta["parts_written"].value == 0 and meta["steps"].value == 7


def test_every_asset_is_thin():
    """assets/ is thin (assets/__init__.py): config in, a call into pipeline/, a MaterializeResult out; what an
    asset computes or reports lives in pipeline/ (e.g. ``CollectionResult.facts``, ``pipeline.training.sft_run``)."""
    import ast
    from pathlib import Path

    sizes = {}
    for path in sorted((Path(__file__).parents[2] / "assets").glob("*.py")):
        for node in ast.parse(path.read_text()).body:
            decorators = [d.func if isinstance(d, ast.Call) else d for d in getattr(node, "decorator_list", [])]
            if any(getattr(d, "id", getattr(d, "attr", "")) == "asset" for d in decorators):
                body = node.body[1:] if isinstance(node.body[0], ast.Expr) else node.body  # without the docstring
                sizes[f"{path.name}:{node.name}"] = body[-1].end_lineno - body[0].lineno + 1
    assert len(sizes) > 10, "the scan found (almost) no assets"
    assert {name: n for name, n in sizes.items() if n > 50} == {}
