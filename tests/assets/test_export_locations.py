"""One authority for where exports go: an export written to a directory of the user's choosing
(``ExportConfig.directory``, the rollouts' ``directory``) is recorded under the data root, and its
consumers — SFT training and the run summary — read that directory, not the default one."""

from pathlib import Path

import yaml
from dagster import materialize
from dagster_duckdb import DuckDBResource

from cli.summary import summary
from pipeline.export.revisions import export_revision
from pipeline.select.selection import build_benchmark, build_mixture
from pipeline.store.layout import DataLayout
from pipeline.store.versions import MIXTURE
from tests.support import fake_llamafactory
from tests.support.layouts import stratified_copy


def test_the_record_keeps_a_directory_under_the_root_relative_and_one_outside_absolute(tmp_path):
    layout = DataLayout.at(tmp_path / "data")
    assert layout.recorded_export(MIXTURE) is None and layout.recorded_exports() == {}
    layout.record_export(MIXTURE, layout.export_current(MIXTURE), version="sft-1")
    layout.record_export("benchmark", tmp_path / "elsewhere", version="bench-1")
    assert layout.recorded_export(MIXTURE) == layout.export_current(MIXTURE)
    assert layout.recorded_export("benchmark") == tmp_path / "elsewhere"
    moved = DataLayout.at(tmp_path / "moved")
    (tmp_path / "data").rename(moved.root)  # a moved root keeps its own exports
    assert moved.recorded_export(MIXTURE) == moved.export_current(MIXTURE)


def test_training_and_the_summary_read_the_export_where_it_went(default_layout, tmp_path, capsys):
    layout = stratified_copy(default_layout, tmp_path / "data")
    build_benchmark(layout, seed=0, on_shortfall="warn")
    build_mixture(layout, {"failure": 5, "no_change": 50, "simple": 50, "complex": 20}, seed=0)
    export_revision(layout, "benchmark", None)  # the benchmark at its default place
    from assets.export import sft_dataset
    from assets.training import sft_training
    from resources import DataStoreResource, HuggingFaceHubResource, JobLauncherResource

    elsewhere = tmp_path / "my-exports" / "sft"
    store = DataStoreResource(data_root=str(layout.root))
    exported = materialize(
        [sft_dataset],
        resources={"store": store, "hub": HuggingFaceHubResource()},
        run_config={"ops": {"sft_dataset": {"config": {"directory": str(elsewhere)}}}},
    )
    assert exported.success
    assert (elsewhere / "dataset_info.json").exists() and not layout.export_dir(MIXTURE).exists()
    assert layout.recorded_export(MIXTURE) == elsewhere

    # training finds the mixture where sft_dataset put it (the default export/sft_mixture/current does not exist)
    python = fake_llamafactory.make_env(tmp_path / "lf-env")
    model = tmp_path / "base-model"
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "qwen3"}')
    (model / "model.safetensors").write_bytes(b"\0" * 64)
    launcher = JobLauncherResource(backend="local", workdir=str(layout.root / "jobs"), llamafactory_python=str(python))
    trained = materialize(
        [sft_training],
        resources={
            "store": store,
            "launcher": launcher,
            "duckdb": DuckDBResource(database=str(layout.root / "jobs.duckdb")),
        },
        run_config={
            "ops": {
                "sft_training": {
                    "config": {
                        "model_name_or_path": str(model),
                        "bf16": False,
                        "save_steps": 2,
                        "logging_steps": 1,
                        "preprocessing_num_workers": 1,
                        "gpus": 0,
                        "extra_args": {"max_steps": 2},
                    }
                }
            }
        },
    )
    assert trained.success
    meta = trained.get_asset_materialization_events()[0].event_specific_data.materialization.metadata
    final = layout.checkpoints / meta["checkpoint_version"].value
    assert Path(yaml.safe_load((final / "llamafactory_train.yaml").read_text())["dataset_dir"]) == elsewhere.resolve()

    # the summary lists both exports where they are
    capsys.readouterr()
    summary(layout)
    out = capsys.readouterr().out
    assert f"Hugging Face dataset: {elsewhere}  (datasets.load_dataset('{elsewhere}'))" in out
    assert f"Hugging Face dataset: {layout.export_current('benchmark')} = " in out
