"""A rollout run as the ``simulated_rollouts`` asset runs it (no Dagster here): :func:`rollout_tasks` makes the tasks
(an LLM agent's from the configured sources, else recorded trajectories), :func:`roll_out` lets each simulator play them
and writes its run, and :func:`rollout_facts` says what the runs gave, with the oracle's drift check."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from pipeline.core.progress import Log
from pipeline.evaluate.simulator_spec import SimulatorSpec
from pipeline.evaluate.simulators import make_simulator
from pipeline.execution.sandbox import Sandbox
from pipeline.models.agent_settings import AgentSettings
from pipeline.report.tables import Facts, Markdown, Table
from pipeline.rollouts import store as rollout_store
from pipeline.rollouts.loop import RolloutTask, ToolCode, run_id, simulate
from pipeline.rollouts.shadow import shadow_all
from pipeline.store.layout import DataLayout


def rollout_tasks(
    layout: DataLayout,
    picked: Sequence[Any] | None,
    questions: Mapping[tuple[str, str], Sequence[str]] | None,
    limit: int,
    seed: int,
    sources: Sequence[str],
    min_steps: int,
) -> tuple[list[RolloutTask], list[str]]:
    """The tasks to roll out and the warnings to log: an LLM agent's tasks ``picked`` from the configured
    sources (collect's ``agent_tasks``: a task id, its environment and user turns), else ``limit`` recorded
    trajectories (seeded choice, of ``sources``, at least ``min_steps`` actions), each with its task's user
    turns from ``questions`` (collect's ``task_turns``) where the configured sources know them. The caller
    (the asset) asks collect for both: rollouts do not import collect."""
    if picked is not None:
        return [RolloutTask(t.task_id, t.task_id, t.env, turns=tuple(t.turns)) for t in picked], []
    tasks = rollout_store.recorded_tasks(layout, limit, seed, list(sources), min_steps, questions=questions)
    unasked = sum(not t.turns for t in tasks)
    if not unasked:
        return tasks, []
    return tasks, [
        f"{unasked} of {len(tasks)} recorded tasks have no known question (not in the configured "
        "sources): their rollouts have no user turn and are left out of 'rollout_sft_dataset'"
    ]


def roll_out(
    layout: DataLayout,
    box: Sandbox,
    tasks: list[RolloutTask],
    simulators: Sequence[SimulatorSpec],
    agent: AgentSettings | None,
    max_steps: int,
    log: Log = lambda _m: None,
    debug: Log = lambda _m: None,
) -> list[str]:
    """Each simulator's closed-loop rollouts of ``tasks`` in the sandbox ``box`` (without an ``agent``, the
    executor's runs of the recorded actions are shared by every simulator), each written as a run; returns the
    run ids in the order of ``simulators``."""
    run_ids, shadows, code = [], None, ToolCode()
    if agent is None:  # the executor's runs of the recorded actions, shared by every simulator
        shadows = shadow_all(box, [(t.key, t.task_id, t.env, t.actions[:max_steps]) for t in tasks])
    for spec in simulators:
        rid = run_id(spec.name, "recorded" if agent is None else f"agent-{agent.model}")
        log_path = rollout_store.run_dir(layout, rid) / "requests.jsonl"
        steps, rollouts, report = asyncio.run(
            simulate(tasks, make_simulator(spec), box, log_path, agent, max_steps, shadows, code, debug)
        )
        rollout_store.write_run(layout, report.run_id, steps, rollouts)
        run_ids.append(report.run_id)
        log(
            f"{report.run_id}: {report.rollouts} rollouts, {report.steps} steps, {report.asked} requests "
            f"({report.reused} resumed), {dict(report.statuses)} in {report.seconds:.1f}s"
        )
    return run_ids


@dataclass(frozen=True)
class OracleCheck:
    """Whether the oracle never drifted in the runs (true when it was not rolled out), and what it did."""

    passed: bool
    description: str


def oracle_check(con: duckdb.DuckDBPyConnection, run_ids: list[str]) -> OracleCheck:
    """The oracle's steps in ``run_ids``: it passes with zero drift and full match (FM) on every step."""
    steps, drift, fm = con.execute(
        "SELECT count(*), max(drift), min(fm::INT) FROM rollout_steps "
        "WHERE simulator = 'oracle' AND run_id IN (SELECT unnest(?))",
        [run_ids],
    ).fetchone()
    return OracleCheck(
        passed=not steps or (drift == 0 and fm == 1),
        description=f"{steps} steps, max drift {drift}" if steps else "oracle was not rolled out",
    )


def rollout_facts(
    con: duckdb.DuckDBPyConnection, layout: DataLayout, run_ids: list[str], tasks: int
) -> tuple[Facts, OracleCheck]:
    """What the ``simulated_rollouts`` asset reports of ``run_ids`` (the rollout views refreshed first; the
    drift plot written beside the runs), and the oracle's drift check."""
    plot_path = rollout_store.rollouts_root(layout) / "drift_by_step.png"
    rollout_store.sync(con, layout)
    table = rollout_store.summary(con, run_ids)
    plot = rollout_store.drift_plot(con, run_ids, plot_path)
    values: dict[str, Any] = {
        "rollout_tasks": tasks,
        "summary": Table.of_frame(table),
        "drift_by_step": Markdown(f"![drift vs step](data:image/png;base64,{plot})"),
        "plot_path": plot_path.resolve(),
    }
    return Facts(values), oracle_check(con, run_ids)


def rollout_files(layout: DataLayout) -> list[Path]:
    """Every run's steps file."""
    return sorted(rollout_store.rollouts_root(layout).glob("*/steps.parquet"))
