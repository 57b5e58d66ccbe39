"""One home for the data root and the settings: the ``store`` resource's root is where the DuckDB file,
the GPU jobs and the sensor look; every ``ENVSIM_*`` variable is parsed by ``pipeline.core.settings``
and listed in the settings table (docs/settings.md); DuckDB connections carry the memory cap; importing
``pipeline`` has no side effect."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from dagster import AssetMaterialization, DagsterInstance, Definitions, asset, build_sensor_context, define_asset_job

from pipeline.core.settings import VARIABLES, Settings, SettingsError, settings
from pipeline.store import duck
from pipeline.store.layout import DataLayout
from pipeline.store.versions import BENCHMARK, SplitStore

ROOT = Path(__file__).resolve().parents[2]


def _grep(pattern: str, *where: str) -> list[str]:
    """``path:line: text`` of every line of the Python files (and plain files) under ``where`` matching ``pattern``."""
    files = [p for w in where for p in ((ROOT / w).rglob("*.py") if (ROOT / w).is_dir() else [ROOT / w])]
    assert files, where
    return [
        f"{f.relative_to(ROOT)}:{i}: {line}"
        for f in sorted(files)
        if "__pycache__" not in f.parts
        for i, line in enumerate(f.read_text().splitlines(), 1)
        if re.search(pattern, line)
    ]


def _code_location():
    from assets.definitions import defs

    return defs()


def test_a_root_set_on_the_store_resource_moves_duckdb_and_the_jobs(tmp_path):
    """The code location's resources, launched with ``store.data_root`` in the run config (as the Launchpad
    does): the DuckDB file and the launcher's working directory are under that root, not under ./data."""
    from resources.storage import DataStoreDuckDBResource, DataStoreJobLauncherResource, DataStoreResource

    seen = {}

    @asset
    def probe(
        store: DataStoreResource, duckdb: DataStoreDuckDBResource, launcher: DataStoreJobLauncherResource
    ) -> None:
        seen["store"] = store.layout().root
        with duckdb.get_connection() as con:
            con.execute("CREATE TABLE probe AS SELECT 1 AS x")
            seen["memory_limit"] = con.execute("SELECT current_setting('memory_limit')").fetchone()[0]
        seen["duckdb"] = Path(duckdb.path)
        seen["jobs"] = launcher.jobs_dir()

    defs = _code_location()
    assert set(defs.resources) >= {"store", "duckdb", "launcher"}
    probing = Definitions(
        assets=[probe], resources=defs.resources, jobs=[define_asset_job("probe_job", selection=["probe"])]
    )
    root = tmp_path / "elsewhere"
    result = probing.resolve_job_def("probe_job").execute_in_process(
        run_config={"resources": {"store": {"config": {"data_root": str(root)}}}}
    )
    assert result.success
    layout = DataLayout.at(root)
    assert seen["store"] == root and seen["duckdb"] == layout.duckdb == root / "envsim.duckdb"
    assert layout.duckdb.exists() and seen["jobs"] == layout.jobs == root / "jobs"
    assert seen["memory_limit"] == "488.2 MiB"  # the ENVSIM_DUCKDB_MEMORY cap (512MB), not DuckDB's 80 % of RAM


def test_resources_built_directly_follow_their_store(tmp_path):
    from resources.storage import DataStoreDuckDBResource, DataStoreJobLauncherResource, DataStoreResource

    store = DataStoreResource(data_root=str(tmp_path / "d"))
    assert DataStoreDuckDBResource(store=store).path == str(tmp_path / "d" / "envsim.duckdb")
    assert DataStoreDuckDBResource(store=store, database=str(tmp_path / "x.duckdb")).path == str(tmp_path / "x.duckdb")
    assert DataStoreJobLauncherResource(store=store).jobs_dir() == tmp_path / "d" / "jobs"
    assert DataStoreJobLauncherResource(store=store, workdir=str(tmp_path / "j")).jobs_dir() == tmp_path / "j"


def test_the_sensor_reads_the_split_seed_under_the_store_root(tmp_path):
    from assets.automation import splits_on_new_steps
    from resources.storage import DataStoreResource

    layout = DataLayout.at(tmp_path / "data")
    store = SplitStore(layout, BENCHMARK)
    store.write_manifest("v-test", {"spec": {"seed": 4242}})
    store.set_current("v-test")
    assert store.current_seed() == 4242
    instance = DagsterInstance.ephemeral()
    instance.report_runless_asset_event(AssetMaterialization("labeled_steps"))
    context = build_sensor_context(
        instance=instance, resources={"store": DataStoreResource(data_root=str(layout.root))}
    )
    requests = splits_on_new_steps.evaluate_tick(context).run_requests  # (calling an asset sensor that takes a
    # resource directly fails in Dagster 1.13: its wrapper does not accept the resource)
    assert len(requests) == 1
    assert requests[0].run_config["ops"]["benchmark_split"]["config"]["seed"] == 4242
    # the code location's sensor gets the code location's store, whose root follows ENVSIM_DATA_ROOT
    defs = _code_location()
    assert "store" in defs.resolve_sensor_def("splits_on_new_steps").required_resource_keys


def test_settings_parse_once_per_environment_and_name_the_bad_variable(monkeypatch):
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert settings() == Settings() and settings() is settings()
    monkeypatch.setenv("ENVSIM_DATA_ROOT", "/srv/envsim")
    monkeypatch.setenv("ENVSIM_SHARDS", " 4 ")
    monkeypatch.setenv("ENVSIM_EXECUTOR", "In_Process")
    monkeypatch.setenv("ENVSIM_DUCKDB_THREADS", "0")
    now = settings()
    assert now.data_root == Path("/srv/envsim") and now.shards == 4 and now.executor == "in_process"
    assert now.duckdb_threads is None and now is settings()
    assert DataLayout.at(None).root == Path("data")  # the entry point passes its settings' root: nothing reads it here
    monkeypatch.setenv("ENVSIM_SHARDS", "")  # empty: unset
    assert settings().shards is None
    for name, bad in (("ENVSIM_SHARDS", "0"), ("ENVSIM_SANDBOX_WORKERS", "many"), ("ENVSIM_MAX_CONCURRENT", "-1")):
        with pytest.raises(SettingsError, match=f"{name} must be a whole number"):
            Settings.from_env({name: bad})
    assert Settings.from_env({"ENVSIM_DUCKDB_MEMORY": "2GB"}).duckdb_memory == "2GB"


def test_duckdb_connections_carry_the_memory_cap(monkeypatch):
    """The cap of the code location's settings value (``build_definitions`` hands it to ``duck.configure``),
    whatever the environment says: nothing reads ``ENVSIM_DUCKDB_MEMORY`` after the entry point."""
    from assets.definitions import build_definitions

    monkeypatch.setenv("ENVSIM_DUCKDB_MEMORY", "9GB")
    monkeypatch.setenv("ENVSIM_DUCKDB_THREADS", "3")
    try:
        build_definitions(Settings(duckdb_memory="123MB", duckdb_threads=2))
        con = duck.connect()
        limit = con.execute("SELECT current_setting('memory_limit')").fetchone()[0]
        assert limit.endswith("MiB") and 110 < float(limit.split()[0]) < 125, limit
        assert con.execute("SELECT current_setting('threads')").fetchone()[0] == 2
    finally:
        duck.configure(Settings())
    assert duck.connection_config()["memory_limit"] == "512MB"  # Settings' default, not the environment's 9GB
    # no connection of the pipeline bypasses the helper
    opened = _grep(r"duckdb\.(connect|sql)\(", "pipeline", "assets", "resources", "cli")
    assert opened and [line for line in opened if not line.startswith("pipeline/store/duck.py:")] == []


def test_every_variable_is_read_through_settings_and_documented_once():
    """No module reads an ``ENVSIM_*`` variable from the environment itself, and the settings
    table has one row per variable (those the shell scripts and tests read too)."""
    assert (
        _grep(r"environ(\.get)?[\[(][\"']ENVSIM_|getenv\([\"']ENVSIM_", "pipeline", "assets", "resources", "cli") == []
    )
    assert _grep(r"environ(\.get)?[\[(][\"']ENVSIM_", "tests")  # the pattern finds a reader (tests read their own)
    readme = (ROOT / "docs" / "settings.md").read_text()
    section = readme.split("\n## Settings\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([A-Z_]+)` \|", section, flags=re.M)
    assert len(rows) == len(set(rows))
    used = {
        m
        for line in _grep(r"ENVSIM_[A-Z]", "pipeline", "assets", "resources", "cli", "forge", "tests")
        for m in re.findall(r"ENVSIM_[A-Z_]*[A-Z]", line)
    }
    assert {"ENVSIM_SHARDS", "ENVSIM_PARALLEL_RUNS", "ENVSIM_UI_SCREENSHOTS"} <= used
    assert used <= set(rows), sorted(used - set(rows))
    assert set(VARIABLES) <= set(rows)


#: the entry points: they build the one ``Settings`` value of the process (``settings()``) and pass it down: the code
#: location and the CLI (any module of cli/)
ENTRY_POINTS = ("assets/definitions.py", "cli/")


def test_only_the_entry_points_read_the_process_settings():
    """After the entry point (the CLI, the code location's ``defs``) nothing reads the process environment's
    settings again: the ``Settings`` value, and the ``Profile`` built from it, are passed down."""
    readers = _grep(r"\bsettings\(\)|Settings\.from_env\(\)|from_env\(None", "pipeline", "assets", "resources", "cli")
    assert readers, "the pattern finds a reader"
    outside = [line for line in readers if not line.startswith((*ENTRY_POINTS, "pipeline/core/settings.py:"))]
    assert outside == []


def test_importing_pipeline_has_no_side_effect_and_the_entry_points_choose_jemalloc():
    env = {k: v for k, v in os.environ.items() if k not in ("ARROW_DEFAULT_MEMORY_POOL", "GX_ANALYTICS_ENABLED")}
    code = (
        "import os, pipeline, pipeline.quality.suites, pipeline.store.layout; "
        "print(os.environ.get('ARROW_DEFAULT_MEMORY_POOL'), os.environ.get('GX_ANALYTICS_ENABLED'))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["None", "None"]
    code = "import assets.definitions, pyarrow; print(pyarrow.default_memory_pool().backend_name)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split()[-1] in ("jemalloc", "system")  # system: a pyarrow built without jemalloc
    import pyarrow

    if "jemalloc" in pyarrow.supported_memory_backends():
        assert out.stdout.split()[-1] == "jemalloc"
