"""A bfcl-format task file of two tasks through ``./forge run -c`` (issue 52, item 7, slow): the benchmark takes what
the two replayed trajectories give, the mixture has nothing left after decontamination, so it is skipped with its
reason and a fix that applies to replayed tasks (more tasks, not the exploration budget), and the run exits 0."""

from __future__ import annotations

import pytest

from pipeline.store.versions import BENCHMARK, MIXTURE, SplitStore
from tests.conftest import TWITTER_CFG, make_task_file
from tests.support.bad_tasks import _task
from tests.support.user_corpora import forge_run

pytestmark = pytest.mark.slow


def test_a_two_task_file_skips_the_product_it_cannot_fill_and_exits_0(tmp_path):
    files = make_task_file(
        tmp_path,
        [_task("tweets", ["TwitterAPI"], TWITTER_CFG), _task("math", ["MathAPI"])],
        [
            {
                "id": "tweets",
                "ground_truth": [["post_tweet(content='hello', tags=['#a'])"], ["post_tweet(content='x')"]],
            },
            {"id": "math", "ground_truth": [["add(a=1, b=2)", "mean(numbers=[1, 2, 3])"]]},
        ],
    )
    config = {
        "resources": {
            "sources": {
                "config": {
                    "builtin": {"enabled": False},
                    "bfcl": {
                        "categories": [],
                        "task_files": [{"tasks": str(files.tasks), "answers": str(files.answers)}],
                    },
                }
            }
        }
    }
    (tmp_path / "run").mkdir()
    proc, layout = forge_run(tmp_path / "run", config, timeout=1200)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert SplitStore(layout, BENCHMARK).current() is not None
    assert SplitStore(layout, MIXTURE).current() is None
    (line,) = [line for line in out.splitlines() if line.startswith("sft_mixture: SKIPPED by this run: ")]
    assert "selects no sample: decontamination against benchmark" in line, line
    assert "fix: add tasks (replayed tasks are not explored" in line and "bfcl: task_files" in line, line
    assert "call_budget" not in line and "EmptySelection" not in out and "FAILED" not in out, out[-4000:]
