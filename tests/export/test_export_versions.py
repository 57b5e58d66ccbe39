"""Regenerating splits as users do: every split version exports to its own directory with a ``current``
link (like Hub revisions), an unchanged version is a no-op, an old flat export is kept, the splits sensor
skips unchanged steps and keeps each split's seed, and a short composition fails its check honestly."""

from __future__ import annotations

import shutil

import datasets
import pyarrow.parquet as pq
import pytest
from dagster import AssetCheckSeverity, DagsterInstance, build_asset_context, build_sensor_context

from assets.automation import splits_on_new_steps
from assets.selection import _composition_check
from pipeline.core.strata import BENCHMARK_CELLS, Cell
from pipeline.export.hf_layout import MARKER, export_split
from pipeline.export.revisions import export_revision
from pipeline.select.selection import build_benchmark, build_mixture
from pipeline.store.layout import DataLayout
from pipeline.store.versions import BENCHMARK, MIXTURE, SplitStore
from resources.storage import DataStoreResource
from tests.support.layouts import stratified_copy

SIZES = {"failure": 5, "no_change": 60, "simple": 60, "complex": 20}


@pytest.fixture()
def layout(default_layout, tmp_path):
    return stratified_copy(default_layout, tmp_path / "data")


def test_each_version_has_its_own_export_and_current_moves(layout):
    first = build_benchmark(layout, seed=1, on_shortfall="warn")
    one = export_revision(layout, BENCHMARK, None)
    assert one.report.directory == layout.export_version(BENCHMARK, first.version) and not one.unchanged
    second = build_benchmark(layout, seed=2, on_shortfall="warn")
    assert second.version != first.version
    two = export_revision(layout, BENCHMARK, None)  # used to be ExportConflict
    assert layout.export_version(BENCHMARK, first.version).joinpath(MARKER).exists()  # the old one is kept
    assert layout.export_current(BENCHMARK).resolve() == two.report.directory.resolve()
    assert layout.export_current(BENCHMARK).resolve().name == second.version
    loaded = datasets.load_dataset(str(layout.export_current(BENCHMARK)), split="test")
    assert len(loaded) == second.samples


def test_an_unchanged_version_is_a_no_op(layout):
    build_mixture(layout, SIZES, seed=1, benchmark_version=build_benchmark(layout, seed=1, on_shortfall="warn").version)
    first = export_revision(layout, MIXTURE, None)
    stamps = {p: p.stat().st_mtime_ns for p in first.report.directory.rglob("*") if p.is_file()}
    again = export_revision(layout, MIXTURE, None)
    assert again.unchanged and again.report.rows == first.report.rows and again.report.files == first.report.files
    assert {p: p.stat().st_mtime_ns for p in again.report.directory.rglob("*") if p.is_file()} == stamps
    other_prompt = export_revision(layout, MIXTURE, None, prompt="envsimbench")
    assert not other_prompt.unchanged  # other options: written again


def test_a_flat_export_of_the_old_layout_moves_into_its_version(layout):
    bench = build_benchmark(layout, seed=1, on_shortfall="warn")
    flat = export_split(layout, BENCHMARK, None, layout.export_dir(BENCHMARK))
    rows = flat.rows
    build_benchmark(layout, seed=2, on_shortfall="warn")
    export_revision(layout, BENCHMARK, None)
    kept = layout.export_version(BENCHMARK, bench.version)
    assert sum(pq.ParquetFile(p).metadata.num_rows for p in (kept / "data").glob("*.parquet")) == rows


def test_the_current_link_survives_moving_the_data_root(layout, tmp_path):
    build_benchmark(layout, seed=1, on_shortfall="warn")
    export_revision(layout, BENCHMARK, None)
    moved = DataLayout.at(tmp_path / "moved")
    shutil.copytree(layout.root, moved.root, symlinks=True)
    shutil.rmtree(layout.root)
    assert (moved.export_current(BENCHMARK) / "README.md").exists()
    assert datasets.load_dataset(str(moved.export_current(BENCHMARK)), split="test").num_rows > 0


def test_the_sensor_skips_unchanged_steps_and_keeps_each_splits_seed(layout):
    bench = build_benchmark(layout, seed=7, on_shortfall="warn")
    build_mixture(layout, SIZES, seed=11, benchmark_version=bench.version)
    with DagsterInstance.ephemeral() as instance:
        from dagster import AssetMaterialization

        instance.report_runless_asset_event(AssetMaterialization("labeled_steps"))
        context = build_sensor_context(
            instance=instance, resources={"store": DataStoreResource(data_root=str(layout.root))}
        )
        tick = splits_on_new_steps.evaluate_tick(context)
        assert not tick.run_requests and "labeled steps unchanged" in tick.skip_message
        SplitStore(layout, MIXTURE).manifest(SplitStore(layout, MIXTURE).current())  # still there
        # a new input (the mixture drawn from other steps) gives a request with each split's own seed
        store = SplitStore(layout, MIXTURE)
        manifest = store.manifest(store.current())
        manifest["spec"]["input"] = "0000000000000000"
        store.write_manifest(store.current(), manifest)
        context = build_sensor_context(
            instance=instance, resources={"store": DataStoreResource(data_root=str(layout.root))}
        )
        (request,) = splits_on_new_steps.evaluate_tick(context).run_requests
    assert request.run_config["ops"]["benchmark_split"]["config"]["seed"] == 7
    assert request.run_config["ops"]["sft_mixture"]["config"]["seed"] == 11


@pytest.mark.parametrize("on_shortfall, severity", [("warn", AssetCheckSeverity.WARN)])
def test_composition_matches_fails_on_a_cell_filled_0_of_10(layout, on_shortfall, severity):
    impossible = Cell(name="huge_delta", group="difficult", quota=10, delta_min=900, delta_max=999)
    result = build_benchmark(layout, [*BENCHMARK_CELLS[:2], impossible], seed=1, on_shortfall=on_shortfall)
    check = _composition_check(build_asset_context(), "composition_matches", result, on_shortfall, layout)
    assert not check.passed and check.severity == severity
    assert "huge_delta (|Δ| 900–999): 0 of 10, max |Δ| in the corpus " in check.description
    ok = build_benchmark(layout, [Cell(name="two_no_change", group="no_change", quota=2)], seed=1, on_shortfall="fail")
    assert _composition_check(build_asset_context(), "composition_matches", ok, "fail", layout).passed
