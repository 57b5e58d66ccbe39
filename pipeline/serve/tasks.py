"""The tasks a server hands out: every source's scenarios under the run's :class:`SourceConfig`, each with its
environment spec, its OpenAI tool schemas (from the catalog, read without running code) and its executable checks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pipeline.collect.sources import env_items
from pipeline.core.environment import EnvSpec
from pipeline.core.trajectory import Trajectory
from pipeline.envs import registry
from pipeline.envs.config import SourceConfig
from pipeline.envs.source import SourceTask

#: the note a task without executable checks is served with (its reward is null, never a made-up 0)
NO_CHECK = "no executable check for this task: reward is null"
#: the note of a task rewarded by its ground-truth replay (bfcl's multi-turn tasks)
BY_REFERENCE = "reward 1.0 when the real state equals the ground-truth replay's final state, else 0.0"


@dataclass(frozen=True)
class ServedTask:
    """One task as served: ``checks`` are ``check_func`` code texts (run in the sandbox); ``note`` says why the
    reward is null when there are none."""

    task_id: str
    env: EnvSpec
    text: str
    tools: tuple[dict[str, Any], ...]
    checks: tuple[str, ...] = ()
    note: str | None = None
    #: ground-truth calls (tool, arguments): without checks, the reward is whether the real state equals the state
    #: they leave (:mod:`pipeline.serve.episode`)
    reference: tuple[tuple[str, dict[str, Any]], ...] = ()


def check_codes(checklist: Any) -> tuple[str, ...]:
    """The ``check_func`` code texts of an EnvScaler ``checklist_with_func`` (a list of items, or a mapping of
    them); items without code are left out."""
    items = checklist.values() if isinstance(checklist, dict) else checklist if isinstance(checklist, list) else []
    return tuple(i["check_func"] for i in items if isinstance(i, dict) and isinstance(i.get("check_func"), str))


def served(task: SourceTask, reference: tuple[tuple[str, dict[str, Any]], ...] = ()) -> ServedTask:
    """A source's task as served (its tool schemas read from the catalog); ``reference``: its ground-truth calls,
    the reward of a task without checks."""
    checks = check_codes(task.checklist)
    reference = () if checks else reference
    return ServedTask(
        task.task_id,
        task.env,
        task.text or (task.turns[0] if task.turns else ""),
        tuple(registry.tool_schemas(task.env)),
        checks,
        None if checks else BY_REFERENCE if reference else NO_CHECK,
        reference,
    )


def load_tasks(cfg: SourceConfig, items: list[Any] | None = None) -> list[ServedTask]:
    """Every source's scenarios (the tasks exploration runs from), then the agent tasks of sources that have no
    scenarios (bfcl's multi-turn tasks, rewarded by their ground-truth replay), in registry order; one per
    ``task_id`` (the first)."""
    if items is None:
        items, _ = env_items(cfg)
    out: dict[str, ServedTask] = {}
    for source in registry.sources():
        if source.why_disabled(cfg) is not None:
            continue
        tasks, _ = source.scenarios(cfg, items, None)
        references: dict[str, tuple[tuple[str, dict[str, Any]], ...]] = {}
        if not tasks:
            tasks = source.agent_tasks(cfg, items)
            references = {
                t.task_id: tuple((a.name, a.arguments) for a in t.actions)
                for t in source.replay(cfg)
                if isinstance(t, Trajectory)
            }
        for task in tasks:
            out.setdefault(task.task_id, served(task, references.get(task.task_id, task.reference)))
    return list(out.values())
