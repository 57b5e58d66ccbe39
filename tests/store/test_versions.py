"""CURRENT and the lineage of split versions (issue 32, item 5): re-making an existing version current (a run
back at seed 0 after a run at seed 1) is a change a run announces, and never rewrites a parent, so
``parent_version`` has no cycle."""

from __future__ import annotations

from pipeline.store.layout import DataLayout
from pipeline.store.versions import BENCHMARK, SplitStore


def _store(tmp_path, *versions: str) -> SplitStore:
    store = SplitStore(DataLayout.at(tmp_path / "data"), BENCHMARK)
    for version in versions:
        store.write_manifest(version, {"samples": 1, "shortfalls": [], "spec": {"seed": 0}})
    return store


def _ancestors(parents: dict[str, str | None], version: str) -> list[str]:
    seen = [version]
    while parents.get(seen[-1]) is not None:
        if parents[seen[-1]] in seen:
            raise AssertionError(f"parent_version loops: {' -> '.join(seen + [parents[seen[-1]]])}")
        seen.append(parents[seen[-1]])
    return seen


def test_making_a_version_current_again_keeps_the_lineage_acyclic(tmp_path):
    store = _store(tmp_path, "bench-43d6", "bench-6ec2")
    assert store.set_current("bench-43d6", "run-0") is None  # seed 0
    assert store.set_current("bench-6ec2", "run-1") == "bench-43d6"  # seed: 1
    assert store.set_current("bench-43d6", "run-2") == "bench-6ec2"  # unchanged ./forge run: seed 0 again
    parents = {v: row["parent_version"] for v, row in store.provenance().items()}
    assert parents == {"bench-43d6": None, "bench-6ec2": "bench-43d6"}
    for version in parents:
        _ancestors(parents, version)
    assert store.current() == "bench-43d6"


def test_the_change_of_current_is_known_per_run(tmp_path):
    store = _store(tmp_path, "bench-43d6", "bench-6ec2")
    store.set_current("bench-43d6", "run-0")
    store.set_current("bench-6ec2", "run-1")
    store.set_current("bench-6ec2", "run-2")  # no change
    store.set_current("bench-43d6", "run-3")
    assert store.changes_by("run-0") == (None, "bench-43d6")
    assert store.changes_by("run-1") == ("bench-43d6", "bench-6ec2")
    assert store.changes_by("run-2") is None
    assert store.changes_by("run-3") == ("bench-6ec2", "bench-43d6")


def test_a_history_written_before_previous_existed_takes_the_first_parent(tmp_path):
    """Older histories logged every change as ``parent``: the first one is the version's parent."""
    store = _store(tmp_path, "bench-43d6", "bench-6ec2")
    store.log("made_current", "bench-43d6", "run-0", parent=None)
    store.log("made_current", "bench-6ec2", "run-1", parent="bench-43d6")
    store.log("made_current", "bench-43d6", "run-2", parent="bench-6ec2")
    assert store.provenance()["bench-43d6"]["parent_version"] is None
    assert store.changes_by("run-2") == ("bench-6ec2", "bench-43d6")
