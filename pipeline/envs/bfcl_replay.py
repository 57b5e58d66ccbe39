"""Ground-truth replay: bfcl tasks -> trajectories of parsed, validated actions (the bfcl source's replay)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from pipeline.core.environment import EnvSpec
from pipeline.core.issues import TaskIssue
from pipeline.core.trajectory import Action, Trajectory
from pipeline.envs import bfcl
from pipeline.envs.bfcl_tasks import BfclTask
from pipeline.envs.callparse import CallParseError, parse_call


def bfcl_env_spec(task: BfclTask) -> EnvSpec:
    return EnvSpec(
        source=bfcl.SOURCE,
        env_id=bfcl.env_id_for(task.involved_classes),
        init_config=task.initial_config,
        options={
            "classes": list(task.involved_classes),
            "excluded": list(task.excluded_functions),
            "long_context": task.category == "long_context",
        },
    )


def ground_truth_trajectory(task: BfclTask) -> Trajectory | TaskIssue:
    """Parse and validate every ground-truth call of a task (never ``eval``)."""
    env = bfcl.BfclEnvironment(task.involved_classes, task.excluded_functions)
    actions: list[Action] = []
    for turn, calls in enumerate(task.ground_truth):
        for pos, text in enumerate(calls):
            where = f"turn {turn} call {pos} {text!r}"
            try:
                parsed = parse_call(text)
            except CallParseError as exc:
                return TaskIssue(task.task_id, "collect", f"{where}: {exc}", task.origin)
            if not env.has_tool(parsed.name):
                why = f"{where}: unknown tool {parsed.name!r} (not a method of {env.env_id})"
                return TaskIssue(task.task_id, "collect", why, task.origin)
            try:
                arguments = env.bind_arguments(parsed.name, parsed.args, parsed.kwargs)
            except TypeError as exc:
                return TaskIssue(task.task_id, "collect", f"{where}: arguments do not fit: {exc}", task.origin)
            actions.append(Action(parsed.name, arguments, turn, text))
    return Trajectory(
        trajectory_id=f"{bfcl.SOURCE}/{task.task_id}/gt",
        task_id=task.task_id,
        env=bfcl_env_spec(task),
        actions=tuple(actions),
        category=task.category,
        strategy="ground_truth",
    )


def ground_truth_trajectories(
    tasks: Iterable[BfclTask | TaskIssue],
) -> Iterator[Trajectory | TaskIssue]:
    seen: set[str] = set()
    for task in tasks:
        if isinstance(task, TaskIssue):
            yield task
            continue
        if task.task_id in seen:
            yield TaskIssue(task.task_id, "collect", "duplicate task id; first occurrence kept", task.origin)
            continue
        seen.add(task.task_id)
        yield ground_truth_trajectory(task)
