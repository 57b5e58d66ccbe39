"""The builtin pack (:mod:`pipeline.envs.builtin`): this project's EnvScaler-format environments with
seeded scenarios, run by the ``envscaler`` adapter."""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.core.fields import setting
from pipeline.core.issues import TaskIssue
from pipeline.envs import builtin, envscaler
from pipeline.envs.config import SourceConfig, SourceSettings
from pipeline.envs.records import FirstSeen
from pipeline.envs.source import EnvironmentSource, SourceTask


@dataclass(frozen=True)
class BuiltinSettings(SourceSettings):
    """The builtin environment pack and its seeded scenarios."""

    enabled: bool = setting(True, "Use the builtin environment pack.")
    scenarios_per_env: int = setting(300, "Seeded scenarios generated per builtin env.")
    seed: int = setting(0, "Seed of the builtin scenario generators.")


class BuiltinSource(EnvironmentSource):
    """The builtin pack (:class:`BuiltinSettings`)."""

    name = builtin.PREFIX
    adapter = envscaler.SOURCE
    prefix = builtin.PREFIX
    license = builtin.LICENSE
    card_license = "Apache-2.0 (envsim-forge builtin pack)"
    #: the pack was built so the plain policy fills every stratum, and regression tests pin its bytes
    relational = False
    settings = BuiltinSettings

    def why_disabled(self, cfg: SourceConfig) -> str | None:
        return None if cfg.of(self).enabled else "the builtin pack is off (resources.sources.builtin.enabled: false)"

    def env_items(self, cfg: SourceConfig, ids: FirstSeen) -> tuple[list[envscaler.EnvItem], list[TaskIssue]]:
        items = builtin.parsed_items() if cfg.of(self).enabled else []
        for item in items:
            ids.seen(item.qualified_id, item.origin or item.prefix)
        return items, []

    def scenarios(
        self, cfg: SourceConfig, items: list[envscaler.EnvItem], without: list[str] | None
    ) -> tuple[list[SourceTask], list[TaskIssue]]:
        own = cfg.of(self)
        if not own.enabled:
            return [], []
        by_id = {i.qualified_id: i for i in items}
        tasks = [
            SourceTask(
                sc["task_id"],
                by_id[f"{builtin.PREFIX}/{sc['env_id']}"].spec(sc["init_config"]),
                (sc["task"] or "Complete the task.",),
                text=sc["task"],
                checklist=sc["checklist_with_func"],
            )
            for sc in builtin.scenarios(own.scenarios_per_env, own.seed)
        ]
        return tasks, []
