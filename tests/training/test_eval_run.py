"""The evaluation job before and after it runs, without Dagster (pipeline/training/eval_run.py): what it is
given, the lineage of its runs and what the ``simulator_eval_job`` asset reports of its report."""

from pathlib import Path

import pandas as pd

from pipeline.report.tables import Table
from pipeline.training.eval_run import GPU_CHECK, eval_extras, eval_facts, eval_lineage, eval_script

SERVED = {
    "run_id": "ckpt-abc@v1",
    "served_model": "ckpt-abc",
    "weights_id": "ckpt-abc",
    "template": "qwen",
    "backend": "hf",
    "checkpoint_path": "/data/checkpoints/ckpt-abc",
    "checkpoint_version": "ckpt-abc",
}


def _report(served=True):
    runs = {
        "no_change@v1": {
            "simulator": "no_change",
            "parse_failures": 0,
            "cm_by_group": {"read": 1.0, "write": 0.0},
            "scored": 4,
            "resumed": 0,
        },
        "ckpt-abc@v1": {
            "simulator": "ckpt-abc",
            "weights_id": "ckpt-abc",
            "parse_failures": 2,
            "cm_by_group": {"read": 0.5},
            "scored": 3,
            "resumed": 1,
        },
    }
    return {"split_version": "v1", "samples": 4, "runs": runs, "served": SERVED if served else None}


def test_the_job_script_checks_for_a_gpu_only_when_it_asks_for_one():
    assert eval_script("/opt/py thon", 0) == "'/opt/py thon' -m assets.training_entry evaluate\n"
    assert eval_script("python", 1) == GPU_CHECK + "python -m assets.training_entry evaluate\n"
    extras = eval_extras(Path("/data"), None, [{"name": "oracle"}], None, Path("/work/eval"), 4)
    assert extras == {
        "data_root": "/data",
        "split_version": None,
        "simulators": [{"name": "oracle"}],
        "served": None,
        "workdir": "/work/eval",
        "max_samples": 4,
    }


def test_the_served_models_lineage_is_on_its_own_run_only():
    rows = {r["run_id"]: r for r in eval_lineage(_report(), "job-7", "dagster-1")}
    assert rows["no_change@v1"] == {
        "run_id": "no_change@v1",
        "simulator": "no_change",
        "split_version": "v1",
        "job_id": "job-7",
        "dagster_run_id": "dagster-1",
        "weights_id": None,
    }
    served = rows["ckpt-abc@v1"]
    assert served["weights_id"] == "ckpt-abc" and served["template"] == "qwen" and served["backend"] == "hf"
    assert served["checkpoint_path"] == "/data/checkpoints/ckpt-abc" and served["checkpoint_version"] == "ckpt-abc"
    assert all("served_model" not in r for r in eval_lineage(_report(served=False), "job-7", "d"))


def test_the_facts_name_the_served_checkpoint_and_its_manifest():
    summary = pd.DataFrame([{"run_id": "no_change@v1", "cm": 0.5}, {"run_id": "ckpt-abc@v1", "cm": 0.25}])
    plain = eval_facts(_report(served=False), "job-7", summary, None).values
    assert list(plain) == ["job_id", "split_version", "samples", "summary", "cm_by_group_from_job"]
    groups = plain["cm_by_group_from_job"]
    assert isinstance(groups, Table) and groups.columns == ["run", "parse_failures", "read", "write"]
    assert groups.rows[1]["run"] == "ckpt-abc@v1" and pd.isna(groups.rows[1]["write"])  # no write samples
    assert plain["summary"].rows == summary.to_dict("records")
    manifest = {"checkpoint_version": "ckpt-abc", "mixture_version": "mix-1"}
    served = eval_facts(_report(), "job-7", summary, manifest).values
    assert served["checkpoint"] == Path("/data/checkpoints/ckpt-abc")
    assert (served["scored"], served["resumed"], served["parse_failures"]) == (3, 1, 2)
    assert served["served_model"] == "ckpt-abc" and served["mixture_version"] == "mix-1"
    assert "mixture_version" not in eval_facts(_report(), "job-7", summary, None).values
