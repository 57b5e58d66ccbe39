"""One run history per data root: runs are tagged with the root they wrote to, the splits sensor skips
another root's steps, ``./forge run``'s timings only show this root's runs, and ``./forge`` keeps the
Dagster home under the data root unless DAGSTER_HOME is set."""

from __future__ import annotations

import os
from pathlib import Path

from dagster import DagsterInstance, Definitions, asset, build_sensor_context, define_asset_job

from assets.automation import splits_on_new_steps
from pipeline.store.layout import DataLayout
from resources.storage import DATA_ROOT_TAG, DataStoreResource, root_tag

ROOT = Path(__file__).resolve().parents[2]


@asset
def labeled_steps(store: DataStoreResource) -> None:
    """A stand-in for the real asset: only its materialization event and run tags matter here."""
    store.layout().root.mkdir(parents=True, exist_ok=True)


def _materialize(instance: DagsterInstance, data_root: Path) -> str:
    defs = Definitions(
        assets=[labeled_steps],
        jobs=[define_asset_job("steps_job")],
        resources={"store": DataStoreResource(data_root=str(data_root))},
    )
    result = defs.resolve_job_def("steps_job").execute_in_process(instance=instance)
    assert result.success
    return result.run_id


def test_runs_are_tagged_and_the_sensor_ignores_another_roots_steps(tmp_path):
    mine, theirs = tmp_path / "mine", tmp_path / "theirs"
    with DagsterInstance.ephemeral() as instance:
        run_id = _materialize(instance, theirs)
        assert instance.get_run_by_id(run_id).tags[DATA_ROOT_TAG] == root_tag(theirs)
        context = build_sensor_context(instance=instance, resources={"store": DataStoreResource(data_root=str(mine))})
        tick = splits_on_new_steps.evaluate_tick(context)
        assert not tick.run_requests
        assert "another data root" in tick.skip_message and str(theirs) in tick.skip_message
        _materialize(instance, mine)
        context = build_sensor_context(
            instance=instance, resources={"store": DataStoreResource(data_root=str(mine))}, cursor=context.cursor
        )
        assert len(splits_on_new_steps.evaluate_tick(context).run_requests) == 1


def test_the_timings_of_forge_run_never_show_another_roots_run(tmp_path, monkeypatch, capsys):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    from cli.launch import print_run_timings

    with DagsterInstance.get() as instance:
        _materialize(instance, tmp_path / "theirs")
    assert print_run_timings(home, tmp_path / "theirs", "steps_job") is True
    assert print_run_timings(home, tmp_path / "mine", "steps_job") is False
    assert "no run of steps_job" in capsys.readouterr().out


def test_forge_keeps_the_dagster_home_under_the_data_root(tmp_path, monkeypatch):
    """``./forge`` runs from the repository root (``cd "$(dirname "$0")"``) and hands the command to the CLI, which
    makes the data root absolute and keeps the run history under it unless ``DAGSTER_HOME`` is set."""
    from cli.base import child_env, dagster_home, data_root

    assert 'cd "$(dirname "$0")"' in (ROOT / "forge").read_text()
    monkeypatch.chdir(tmp_path)  # as the repository root
    monkeypatch.setenv("ENVSIM_DATA_ROOT", "relative-root")
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    assert data_root() == tmp_path / "relative-root"
    assert dagster_home(data_root()) == tmp_path / "relative-root" / ".dagster_home"
    assert child_env()["DAGSTER_HOME"] == str(tmp_path / "relative-root" / ".dagster_home")
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "somewhere"))
    assert child_env()["DAGSTER_HOME"] == str(tmp_path / "somewhere")
    assert "DAGSTER_HOME" not in os.environ or os.environ["DAGSTER_HOME"] == str(tmp_path / "somewhere")
    assert DataLayout.at(ROOT / "relative-root").root.name == "relative-root"
