"""Reused sandbox children label exactly like freshly forked ones (bfcl with its module state
restored between trajectories, EnvScaler-format code exec'd afresh)."""

from __future__ import annotations

import itertools

from pipeline.envs.bfcl_replay import ground_truth_trajectories
from pipeline.envs.bfcl_tasks import default_task_files, iter_tasks
from pipeline.execution.child import Limits
from pipeline.execution.sandbox import Sandbox


def _labels(result: dict) -> list:
    return [
        (
            s["step_index"],
            s["tool"],
            s["raw_observation"],
            s["outcome"],
            s["state_before_hash"],
            s["state_after_hash"],
            s["delta_size"],
        )
        for s in result["steps"]
    ]


def test_every_bfcl_trajectory_labels_the_same_in_reused_and_fresh_children():
    trajectories = list(ground_truth_trajectories(iter_tasks(default_task_files())))
    with Sandbox(workers=2, limits=Limits(reuse_children=64)) as box:
        reused = {t.trajectory_id: r for t, r in box.run(trajectories)}
        fresh = {t.trajectory_id: r for t, r in box.run(trajectories, fresh_children=True)}
    assert len(reused) == len(fresh) == len(trajectories) == 800
    differ = [
        tid
        for tid in fresh
        if _labels(fresh[tid]) != _labels(reused[tid])
        or fresh[tid]["init"]["state_hash"] != reused[tid]["init"]["state_hash"]
    ]
    assert differ == []


def test_the_same_trajectories_label_identically_again_and_again_in_one_reused_child():
    tasks = list(itertools.islice(iter_tasks(default_task_files()), 30))
    trajectories = list(ground_truth_trajectories(tasks)) * 3
    with Sandbox(workers=1, limits=Limits(reuse_children=200)) as box:
        results = [r for _, r in box.run(trajectories)]
    first, second, third = results[:30], results[30:60], results[60:]
    assert [_labels(r) for r in first] == [_labels(r) for r in second] == [_labels(r) for r in third]


def test_module_state_of_preloaded_env_modules_is_restored():
    import decimal
    import sys

    from pipeline.envs import bfcl
    from pipeline.execution import pristine

    bfcl.preload()
    pristine.prepare()
    try:
        travel = sys.modules["bfcl_eval.eval_checker.multi_turn_eval.func_source_code.travel_booking"]
        vehicle = sys.modules["bfcl_eval.eval_checker.multi_turn_eval.func_source_code.vehicle_control"]
        before = (dict(travel.DEFAULT_STATE), vehicle.MAX_FUEL_LEVEL, decimal.getcontext().prec)
        travel.DEFAULT_STATE["leaked"] = True  # a mutated global
        vehicle.MAX_FUEL_LEVEL = -1  # a rebound global
        decimal.getcontext().prec = 3  # MathAPI's precision
        with_default = next(f for f in pristine._SNAPSHOT if f[2] == "defaults")[0]
        saved = with_default.__defaults__
        with_default.__defaults__ = tuple(["leaked"] * len(saved))  # a mutated default argument
        assert pristine.restore() >= 3
        assert (dict(travel.DEFAULT_STATE), vehicle.MAX_FUEL_LEVEL, decimal.getcontext().prec) == before
        assert with_default.__defaults__ == saved
        assert pristine.restore() == 0  # nothing changed since: nothing copied
    finally:
        decimal.setcontext(decimal.Context())
