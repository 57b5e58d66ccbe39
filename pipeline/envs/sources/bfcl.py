"""bfcl-eval's multi-turn classes: ground-truth replay of its tasks (and optionally exploration),
built and run by the ``bfcl`` adapter (:mod:`pipeline.envs.adapters.bfcl`)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.core.fields import setting
from pipeline.core.issues import TaskIssue
from pipeline.core.trajectory import Trajectory
from pipeline.envs import bfcl, envscaler
from pipeline.envs.bfcl_replay import bfcl_env_spec, ground_truth_trajectories
from pipeline.envs.bfcl_tasks import BfclTaskFile, default_task_files, iter_tasks
from pipeline.envs.config import SourceConfig, SourceSettings
from pipeline.envs.source import CatalogRows, EnvironmentSource, SourceTask


def catalog_rows() -> CatalogRows:
    """Every bfcl class as a catalog row (an item of its class, prefix ``bfcl``), and its tools' and class's code."""
    envs, code_rows = [], []
    for cls_name in bfcl.CLASSES:
        env = bfcl.BfclEnvironment([cls_name])
        code = bfcl.class_source(cls_name)
        item = envscaler.EnvItem(
            cls_name, cls_name, code, env.tools, prefix=bfcl.SOURCE, license=bfcl.LICENSE, adapter=bfcl.SOURCE
        )
        row, code_of = envscaler.catalog_entry(item, [(n, env.source_of(n)) for n in item.tool_names], cls_name)
        envs.append(row)
        code_rows += code_of
    return envs, code_rows


@dataclass(frozen=True)
class BfclSettings(SourceSettings):
    """bfcl-eval's multi-turn tasks: its categories and task files of your own, replayed and/or explored."""

    categories: tuple[str, ...] = setting(bfcl.CATEGORIES, "bfcl-eval multi-turn categories to use.")
    task_files: tuple[BfclTaskFile, ...] = setting((), "Extra task files in bfcl's format (your own tasks).")
    replay: bool = setting(True, "Collect bfcl tasks by ground-truth replay.")
    explore: bool = setting(False, "Also explore bfcl task configs with the policy.")

    def files(self) -> list[BfclTaskFile]:
        """The task files: the categories' and your own."""
        return default_task_files(self.categories) + list(self.task_files)


class BfclSource(EnvironmentSource):
    """bfcl-eval (Apache-2.0): its task files are its settings' categories and files (:class:`BfclSettings`)."""

    name = bfcl.SOURCE
    adapter = bfcl.SOURCE
    prefix = bfcl.SOURCE
    license = bfcl.LICENSE
    card_license = "Apache-2.0 (bfcl-eval, Gorilla project)"
    settings = BfclSettings

    def why_disabled(self, cfg: SourceConfig) -> str | None:
        own = cfg.of(self)
        # recorded message histories may name bfcl environments: they keep bfcl a source of the run
        if (own.files() and (own.replay or own.explore)) or cfg.message_histories:
            return None
        if not own.files():
            return "no bfcl-eval tasks configured (resources.sources.bfcl: categories / task_files empty)"
        return "replay and explore are off (resources.sources.bfcl)"

    def files(self, cfg: SourceConfig) -> list[tuple[str, Path]]:
        own = cfg.of(self)
        if not (own.replay or own.explore):
            return []
        return [
            (f"bfcl.task_files[{i}].{part}", Path(getattr(f, part)))
            for i, f in enumerate(own.files())
            for part in ("tasks", "answers")
        ]

    def catalog(self, items: list[envscaler.EnvItem], listed: bool) -> CatalogRows:
        """Its classes when listed; their tool code always (content-keyed, so a step that names a bfcl
        environment anyway keeps its ``code(a_t)``)."""
        envs, code_rows = catalog_rows()
        return (envs if listed else []), code_rows

    def replay(self, cfg: SourceConfig) -> Iterator[Trajectory | TaskIssue]:
        own = cfg.of(self)
        if own.replay and own.files():
            yield from ground_truth_trajectories(iter_tasks(own.files()))

    def scenarios(
        self, cfg: SourceConfig, items: list[envscaler.EnvItem], without: list[str] | None
    ) -> tuple[list[SourceTask], list[TaskIssue]]:
        if not cfg.of(self).explore:
            return [], []
        return self.agent_tasks(cfg, items), []

    def agent_tasks(self, cfg: SourceConfig, items: list[envscaler.EnvItem]) -> list[SourceTask]:
        return [self._task(t) for t in iter_tasks(cfg.of(self).files()) if not isinstance(t, TaskIssue)]

    @staticmethod
    def _task(task: Any) -> SourceTask:
        """A bfcl task: explored with its question turns as one text; an agent is given each turn
        (an empty one as "Continue.")."""
        turns = tuple(t or "Continue." for t in task.turns) or ("Complete the task.",)
        return SourceTask(task.task_id, bfcl_env_spec(task), turns, text="\n".join(task.turns))
