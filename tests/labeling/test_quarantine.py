"""One environment's labels that do not verify quarantine that environment, not the run."""

from __future__ import annotations

import dataclasses
import itertools

import pyarrow.parquet as pq
import pytest

from pipeline.collect.collector import collect
from pipeline.envs.bfcl_replay import ground_truth_trajectories
from pipeline.envs.bfcl_tasks import default_task_files, iter_tasks
from pipeline.envs.catalog import build_catalog
from pipeline.labeling.quarantine import failed_checks, quarantine
from pipeline.labeling.steps import label
from pipeline.select.stratify import stratify
from pipeline.store.layout import DataLayout
from pipeline.store.reconstruct import kept_verification, verify_steps


@pytest.fixture()
def small_layout(tmp_path, sandbox) -> DataLayout:
    layout = DataLayout.at(tmp_path / "data")
    build_catalog(layout)
    tasks = itertools.islice(iter_tasks(default_task_files()), 40)
    collect(ground_truth_trajectories(tasks), layout, sandbox)
    label(layout, sandbox)
    return layout


def test_a_corrupted_environment_is_quarantined_and_the_others_are_not(small_layout):
    layout = small_layout
    assert verify_steps(layout).ok
    part = layout.step_parts()[0]
    table = pq.read_table(part)
    rows = table.to_pylist()
    victim = next(r for r in rows if r["delta_size"] > 0)
    victim["state_after_hash"] = "f" * 32  # a label that does not verify (as if forged or corrupted)
    pq.write_table(table.from_pylist(rows, schema=table.schema), part)

    report = verify_steps(layout, max_problems=1_000_000)
    assert not report.ok and victim["trajectory_id"] in report.failed_trajectories
    held = quarantine(layout, report)
    assert held["quarantined_environments"].rows == [{"env_id": victim["env_id"]}]

    stratify(layout)
    strata = pq.read_table(layout.strata).to_pylist()
    in_env = [r for r in strata if r["env_id"] == victim["env_id"]]
    others = [r for r in strata if r["env_id"] != victim["env_id"]]
    assert in_env and all(
        r["excluded"] and r["excluded_reason"].startswith("quarantined: delta_roundtrip") for r in in_env
    )
    assert others and any(not r["excluded"] for r in others)
    [doc] = [d for d in failed_checks(layout) if d.get("check") == "delta_roundtrip"]
    assert victim["env_id"] in doc["environments"]


def test_the_verification_is_kept_while_the_steps_are_the_same_bytes_and_redone_when_one_changes(
    small_layout, monkeypatch
):
    """``delta_roundtrip`` on a resumed or repeated run reads the report it wrote; a part changed in place (same
    name, maybe the same size) is verified again and its failure found."""
    from pipeline.store import reconstruct

    layout = small_layout
    first = kept_verification(layout)
    assert first.ok and first.steps > 0 and (layout.quality_dir / "delta_roundtrip_verdict.json").is_file()
    calls = []
    monkeypatch.setattr(reconstruct, "verify_steps", lambda *a, **k: calls.append(a) or verify_steps(*a, **k))
    kept = kept_verification(layout)
    assert calls == [] and kept.kept_from  # the same bytes: the kept report (and where from), nothing replayed
    assert dataclasses.replace(kept, kept_from=None) == dataclasses.replace(first, kept_from=None)

    part = layout.step_parts()[0]
    table = pq.read_table(part)
    rows = table.to_pylist()
    victim = next(r for r in rows if r["delta_size"] > 0)
    victim["state_after_hash"] = "0" * 32  # the same length: the file may keep its size
    pq.write_table(table.from_pylist(rows, schema=table.schema), part)
    again = kept_verification(layout)
    assert len(calls) == 1 and not again.ok and victim["trajectory_id"] in again.failed_trajectories
    assert again.kept_from is None


def test_a_labeling_process_that_dies_names_its_environments(tmp_path, sandbox):
    """SIGKILL of the process labeling a chunk: the next run names the environments it was running,
    labels the chunk again, and removes the marker."""
    import os
    import signal
    import subprocess
    import sys
    import textwrap

    layout = DataLayout.at(tmp_path / "data")
    build_catalog(layout)
    collect(ground_truth_trajectories(itertools.islice(iter_tasks(default_task_files()), 6)), layout, sandbox)
    layout.collected_steps.unlink()  # no labels kept from collection: labeling must execute the calls
    script = textwrap.dedent(f"""
        import os, signal
        from pipeline.execution import sandbox as sb
        from pipeline.execution.sandbox import Sandbox
        from pipeline.labeling.steps import label
        from pipeline.store.layout import DataLayout
        def receive_then_die(self, trajectory, limits):
            os.kill(os.getpid(), signal.SIGKILL)  # the step process dies mid-chunk
        sb._Worker.receive = receive_then_die
        with Sandbox(workers=1) as box:
            label(DataLayout.at({str(layout.root)!r}), box)
    """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=os.getcwd(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL
    from pipeline.labeling.steps import describe_inflight, inflight_path

    message = describe_inflight(layout)
    assert "died while labeling" in message and "bfcl/" in message
    logs: list[str] = []
    report = label(layout, sandbox, log=logs.append)
    assert any("died while labeling" in i.reason for i in report.issues)
    assert report.steps > 0 and not inflight_path(layout).exists()
