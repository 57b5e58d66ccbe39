"""Each call is executed once: labeling keeps the labels collection observed, and they are
byte-identical to what re-executing the trajectories gives."""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path

from pipeline.collect.collector import collect
from pipeline.envs.bfcl_replay import ground_truth_trajectories
from pipeline.envs.bfcl_tasks import default_task_files, iter_tasks
from pipeline.envs.catalog import build_catalog
from pipeline.execution.child import Limits
from pipeline.execution.sandbox import Sandbox
from pipeline.labeling.steps import label
from pipeline.store.layout import DataLayout


def _parts(layout: DataLayout) -> dict[str, bytes]:
    return {Path(p).name: Path(p).read_bytes() for p in layout.step_parts()}


def test_labels_kept_from_collection_equal_a_re_execution(tmp_path, sandbox):
    kept = DataLayout.at(tmp_path / "kept")
    build_catalog(kept)
    collect(ground_truth_trajectories(itertools.islice(iter_tasks(default_task_files()), 60)), kept, sandbox)
    assert kept.collected_steps.exists()
    # the same trajectories table without the collected labels: labeling executes every call
    fresh = DataLayout.at(tmp_path / "fresh")
    shutil.copytree(kept.root, fresh.root, ignore=shutil.ignore_patterns("collected-steps*"))

    calls = {"n": 0}
    real_submit = sandbox.submit

    def counting_submit(trajectories, **kwargs):
        trajectories = list(trajectories)
        calls["n"] += len(trajectories)
        return real_submit(trajectories, **kwargs)

    sandbox.submit = counting_submit
    try:
        first = label(kept, sandbox)
        assert calls["n"] == 0 and first.prelabeled == first.trajectories == 60
        second = label(fresh, sandbox)
        assert calls["n"] == 60 and second.prelabeled == 0
    finally:
        del sandbox.submit
    assert first.steps == second.steps > 0
    assert _parts(kept) == _parts(fresh)  # same content keys, byte-identical files


def test_labels_collected_under_other_limits_are_not_used(tmp_path, sandbox):
    layout = DataLayout.at(tmp_path / "data")
    build_catalog(layout)
    collect(ground_truth_trajectories(itertools.islice(iter_tasks(default_task_files()), 10)), layout, sandbox)
    with Sandbox(workers=1, limits=Limits(call_timeout_s=7)) as other:
        report = label(layout, other)
    assert report.prelabeled == 0 and report.steps > 0
