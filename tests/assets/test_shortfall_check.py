"""Through the real assets: a corpus that cannot fill the default composition (bfcl replay: no |Δ| 4, 6 or
7–12, 10 distinct failures) still yields a benchmark and a mixture by default; the WARN check on
``benchmark_split`` names each missing cell with what the corpus reaches and the fix, the summary says
it and exits 0; ``on_shortfall: fail`` (or ENVSIM_STRICT=1) fails the asset."""

import shutil

import pytest
from dagster import materialize

from assets.definitions import build_definitions
from assets.selection import benchmark_split, sft_mixture, step_strata
from cli.summary import summary
from pipeline.core.settings import Settings
from pipeline.select.shortfall import SHORTFALL_FIX
from pipeline.store.layout import DataLayout
from resources import CompositionResource, DataStoreResource, RunPolicyResource
from resources.storage import DataStoreDuckDBResource
from tests.support.metadata import text

SIZES = {"failure": 5, "no_change": 50, "simple": 50, "complex": 20}


@pytest.fixture
def bfcl_root(default_layout, tmp_path):
    layout = DataLayout.at(tmp_path / "data")
    shutil.copytree(default_layout.root, layout.root)
    shutil.rmtree(layout.root / "splits", ignore_errors=True)
    return layout


def _materialize(layout, run_config=None, composition=None):
    resources = {
        "store": DataStoreResource(data_root=str(layout.root)),
        "duckdb": DataStoreDuckDBResource(store=DataStoreResource(data_root=str(layout.root))),
        "composition": composition or CompositionResource(mixture_sizes=SIZES),
        "run_policy": RunPolicyResource(),
    }
    return materialize(
        [step_strata, benchmark_split, sft_mixture],
        resources=resources,
        run_config=run_config or {},
        raise_on_error=False,
    )


def test_by_default_a_short_benchmark_warns_names_the_reach_and_the_mixture_is_built(bfcl_root, capsys):
    result = _materialize(bfcl_root)
    assert result.success
    checks = {e.check_name: e for e in result.get_asset_check_evaluations()}
    check = checks["composition_matches"]
    assert not check.passed and check.severity.value == "WARN"
    for line in [
        "difficult (|Δ| 7–12): 0 of 50, max |Δ| in the corpus 5",
        "medium_6 (|Δ| 6): 0 of 50, max |Δ| in the corpus 5",
        "medium_4 (|Δ| 4): 0 of 50, no candidate in the corpus (max |Δ| 5)",
    ]:
        assert line in check.description
    assert check.description.endswith(f"fix: {SHORTFALL_FIX}")
    assert check.metadata["fix"].value == SHORTFALL_FIX
    meta = {
        e.asset_key.to_user_string(): e.event_specific_data.materialization.metadata
        for e in result.get_asset_materialization_events()
    }
    assert meta["sft_mixture"]["samples"].value > 0 and meta["sft_mixture"]["decontaminated_by"].value == "trajectory"
    assert "removed_by_trajectory_id" in text(meta["sft_mixture"]["strata"])
    assert checks["no_benchmark_overlap"].passed
    capsys.readouterr()
    assert summary(bfcl_root) == 0
    out = capsys.readouterr().out
    assert "SHORTFALL: benchmark bench-" in out and "  difficult (|Δ| 7–12): 0 of 50, max |Δ| in the corpus 5" in out
    assert f"  fix: {SHORTFALL_FIX}" in out


def test_on_shortfall_fail_fails_the_benchmark_and_builds_no_mixture(bfcl_root):
    result = _materialize(bfcl_root, {"ops": {"benchmark_split": {"config": {"on_shortfall": "fail"}}}})
    assert not result.success
    failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    assert "ShortfallError" in str(failure.event_specific_data.error) and "max |Δ| in the corpus 5" in str(
        failure.event_specific_data.error
    )
    assert not [e for e in result.get_asset_materialization_events() if e.asset_key.to_user_string() == "sft_mixture"]


@pytest.mark.parametrize("strict, expected", [(False, "warn"), (True, "fail")])
def test_the_default_is_warn_and_envsim_strict_makes_it_fail(strict, expected):
    for name in ("default", "small"):
        assert build_definitions(Settings(profile=name, strict=strict)).resources["run_policy"].on_shortfall == expected
    assert RunPolicyResource().on_shortfall == "warn"
