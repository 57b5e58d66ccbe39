"""Crash consistency on the embedded default (builtin pack + bfcl), killed as tests/e2e/test_kill_resume.py kills a
user corpus: SIGKILL 5 s into collection, at the end of labeling and inside the export of the SFT mixture; the next
plain ``./forge run`` reclaims the dead run and resumes to the bytes of an uninterrupted default run."""

from __future__ import annotations

import pytest

from tests.support.kills import assert_reclaimed, forge, kill_chain, product_bytes

pytestmark = pytest.mark.slow


@pytest.mark.timeout(2400)
def test_the_default_run_killed_inside_collection_and_at_a_boundary_resumes_to_the_same_bytes(
    tmp_path, record_property
):
    reference = forge(tmp_path / "reference", ["run"])
    assert reference.returncode == 0, reference.stderr[-3000:]
    root = tmp_path / "killed"
    tried = kill_chain(root, ["run"], ["labeled_steps"], [("trajectories", 5.0), ("sft_dataset", 0.5)])
    resumed = forge(root, ["run"])
    assert_reclaimed(resumed, "the run after the kills")
    assert product_bytes(root) == product_bytes(tmp_path / "reference")
    record_property("reported", f"kill points tried on the default data: {tried}")
