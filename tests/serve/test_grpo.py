"""A real RL update on CPU: SmolLM2-135M-Instruct (the embedded model) does one plain-PyTorch GRPO step
(:mod:`pipeline.serve.grpo`, in .venv-train) against two builtin tasks served through the ``gem.Env`` adapter
(:mod:`pipeline.serve.gem_pipe`, in this Python): 4 samples each, at most 2 turns of at most 48 new tokens, each
call's shape decoded from the task's tools, a group whose rewards are all equal played again (at most once), a
group's four episodes generated in one batch.

The conversion and the step run with one torch thread (``OMP_NUM_THREADS``, unless the run set it: under xdist
:func:`~tests.support.parallel.worker_threads` does): decoding a batch of 4 rows of a 135M model is bound by reading
its weights, so a second thread gains little and, on a busy 2-CPU machine, spin-waits for the first (this test
alone with -n 0 beside another test run, 2026-12-01: 308 s of CPU and 366 s with 2 threads, 141 s and 166 s with 1;
the same episodes and rewards)."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.envs.registry import sources_config
from pipeline.serve.episode import reward_of
from pipeline.serve.host import run_checks
from pipeline.serve.tasks import load_tasks
from tests.e2e.test_real_model import converted_once
from tests.support.parallel import forge_environment

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow
#: AC1007's contractors are paid by one of the first group's four episodes (a group plays the same whatever ran
#: before it: its sampling seed is its own); C002's cart is checked out in neither of its two groups
#: (the first is dropped and played again)
TASKS = ("builtin-banking-s0-00001", "builtin-retail-s0-00001")


@pytest.fixture(scope="module")
def train_python(tmp_path_factory):
    """.venv-train, the LLaMA-Factory job environment (requirements-train.txt), created once by ./forge."""
    return forge_environment(tmp_path_factory, "train-env", ".venv-train", timeout=1800)


def test_one_grpo_step_of_smollm2_through_the_gem_adapter(train_python, tmp_path_factory, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", os.environ.get("OMP_NUM_THREADS") or "1")  # the conversion's and the step's
    model = converted_once(tmp_path_factory, train_python, tmp_path_factory.mktemp("grpo-root"))
    out = tmp_path_factory.mktemp("grpo") / "grpo.json"
    command = [train_python, "-m", "pipeline.serve.grpo", "--model", str(model), "--env-python", sys.executable]
    command += [a for t in TASKS for a in ("--task", t)] + ["--scenarios", "2", "--samples", "4", "--turns", "2"]
    command += ["--max-new-tokens", "48", "--resample", "1", "--seed", "0", "--out", str(out)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=3600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(out.read_text())

    assert math.isfinite(report["loss"]) and math.isfinite(report["grad_norm"]) and report["grad_norm"] > 0
    assert report["changed_tensors"] > 0 and report["max_abs_change"] > 0  # no weight decay: the gradient moved them
    episodes = report["episodes"]
    assert [e["task_id"] for e in episodes] == [t for t in TASKS for _ in range(4)]
    assert all(1 <= len(e["turns"]) <= 2 for e in episodes)
    assert report["model_tokens"] <= 8 * 2 * 48 and report["env_tokens"] > report["model_tokens"]
    # each reward is the task's checks on the real final state, recomputed here
    served = load_tasks(sources_config(builtin={"scenarios_per_env": 2}, bfcl={"categories": ()}))
    checks = {t.task_id: list(t.checks) for t in served}
    for e in episodes:
        verdicts = run_checks(checks[e["task_id"]], e["initial_state"], e["final_state"])
        assert e["reward"] == (reward_of(verdicts) or 0.0), (e["task_id"], e["seed"], verdicts)
    # GRPO's advantages: normalised within each task's group of 4; a kept group with equal rewards only when its
    # resampling ran out, and a dropped group is one whose rewards were all equal
    groups = [report["rewards"][4 * g : 4 * g + 4] for g in range(2)]
    assert any(len(set(g)) > 1 for g in groups), (groups, report["resampled"])
    for g in range(2):
        assert abs(sum(report["advantages"][4 * g : 4 * g + 4])) < 1e-6
    assert report["resampled"] and all(len(set(d["rewards"])) == 1 for d in report["resampled"])
    # every reply calls one of the task's tools (a call's name and first key are decoded from the tools)
    names = {t.task_id: {tool["function"]["name"] for tool in t.tools} for t in served}
    for e in episodes:
        for turn in e["turns"]:
            assert any(
                turn["reply"].startswith(f'<tool_call>{{"name": "{n}", "arguments": {{') for n in names[e["task_id"]]
            )
