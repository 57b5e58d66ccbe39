"""The environment-source protocol: everything the pipeline needs to know about one source (the two words:
docs/environments.md; what a source takes: docs/extending.md "Add an environment source").

A **source** is where environments come from: it names the partitions (``<source>-<i>``), groups the catalog and
the card's licenses, decides what a run collects, and names the **adapter** (:mod:`pipeline.envs.adapters`) that
runs its environments in the sandbox child. Its settings are the dataclass it names in ``settings``
(``resources.sources.config.<name>``), read with ``cfg.of(self)``; sources are listed in :mod:`pipeline.envs.registry`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

from pipeline.core.environment import EnvSpec
from pipeline.core.issues import TaskIssue
from pipeline.core.outcome import RULE_OPTION
from pipeline.core.trajectory import Trajectory
from pipeline.envs import envscaler
from pipeline.envs.config import SourceConfig
from pipeline.envs.records import FirstSeen


@dataclass(frozen=True)
class SourceTask:
    """A task of a source: an environment spec, its user turns and its category. Exploration is given
    ``text`` (the task as one string); an LLM agent is given ``turns``."""

    task_id: str
    env: EnvSpec
    turns: tuple[str, ...]
    category: str = "explore"
    text: str = ""
    #: reference (gold) calls of the task, (tool, arguments) in order: replayed before exploration
    reference: tuple[tuple[str, dict[str, Any]], ...] = ()
    #: the task's executable checks (EnvScaler's ``checklist_with_func``: items with a ``check_func`` code text);
    #: the served reward is the mean of their verdicts (:mod:`pipeline.serve`)
    checklist: Any = None


CatalogRows = tuple[list[dict[str, Any]], list[dict[str, Any]]]


class EnvironmentSource:
    """One source of environments (see the module docstring). Defaults: no files, items, tasks or replay."""

    #: the source's name: partition keys ``<name>-<i>``, the catalog's and the card's grouping
    name: ClassVar[str]
    #: the adapter (:class:`~pipeline.envs.adapters.Adapter`) its environments carry in ``EnvSpec.source``; "": none
    #: of its own (a source of trajectories on other sources' environments only)
    adapter: ClassVar[str] = ""
    #: the first env-id component of its environments (``<prefix>/…``); None: every environment of its
    #: adapter that no other source's prefix claims
    prefix: ClassVar[str | None] = None
    #: license recorded in the catalog for each environment (a corpus may bring its own)
    license: ClassVar[str] = ""
    #: the license line of the dataset card ("" : the catalog's, else "see the source corpus")
    card_license: ClassVar[str] = ""
    #: whether exploration draws its environments' arguments from related records, seeds and refusals
    #: (:class:`~pipeline.execution.policy.PolicySettings` ``relational``) and grows its budget with progress;
    #: false: the plain policy and budget of before (the builtin pack: docs/environments.md)
    relational: ClassVar[bool] = True
    #: its settings: a dataclass (a :class:`~pipeline.envs.config.SourceSettings`, so it may declare an
    #: ``outcome_rule``) whose fields are its section of the run config; None: a source without settings
    settings: ClassVar[type | None] = None
    #: whether its section is a list of ``settings`` values (EnvScaler corpora) rather than one
    many: ClassVar[bool] = False
    #: whether its trajectories are on other sources' environments (served episodes): a partitioned run reads
    #: them in every partition and keeps each one in its environment's partition
    foreign: ClassVar[bool] = False

    # -- the run ---------------------------------------------------------------------------------

    def why_disabled(self, cfg: SourceConfig) -> str | None:
        """Why this configuration leaves the source out (not listed, not counted, its partitions
        empty), or None when it is a source of the run. The one rule, asked by the catalog, the
        collection and the partition notes."""
        return None

    def at_root(self, value: Any, root: Path) -> Any:
        """Its settings ``value`` with what it leaves to the data root ``root`` filled in (default: unchanged; a list
        source's unset list, None, is empty)."""
        return [] if value is None and self.many else value

    def files(self, cfg: SourceConfig) -> list[tuple[str, Path]]:
        """Every file the configuration names for this source, with its config key (below ``resources.sources.``)."""
        return []

    def env_items(self, cfg: SourceConfig, ids: FirstSeen) -> tuple[list[envscaler.EnvItem], list[TaskIssue]]:
        """Its EnvScaler-format environments (and the bad ones); ``ids`` holds the qualified ids
        claimed so far (a second claim is an issue, the first is kept)."""
        return [], []

    def catalog(self, items: list[envscaler.EnvItem], listed: bool) -> CatalogRows:
        """``environments.parquet`` and ``tool_code.parquet`` rows of this source; ``items`` are its own
        EnvScaler-format items; ``listed``: false when the run leaves the source out."""
        return envscaler.catalog_rows(items)

    def scenarios(
        self, cfg: SourceConfig, items: list[envscaler.EnvItem], without: list[str] | None
    ) -> tuple[list[SourceTask], list[TaskIssue]]:
        """The tasks exploration runs from (``items``: every catalogued EnvScaler-format item; an
        environment that no task names may be appended to ``without``)."""
        return [], []

    def agent_tasks(self, cfg: SourceConfig, items: list[envscaler.EnvItem]) -> list[SourceTask]:
        """The tasks an LLM agent is given (default: its exploration tasks, whatever the exploration settings)."""
        return self.scenarios(cfg, items, None)[0]

    def replay(self, cfg: SourceConfig) -> Iterator[Trajectory | TaskIssue]:
        """Trajectories it brings ready-made (ground truth), collected by replay."""
        return iter(())

    # -- what a run takes from it: its environments carry the outcome rule its settings declare -------------

    def declared_rule(self, cfg: SourceConfig) -> str | None:
        """The outcome rule its settings declare for all its environments (``OutcomeRule.id``, parsed once with the
        settings), or None: the default rule, or a list source, whose entries declare one each on their items."""
        own = cfg.of(self)
        return None if self.many or own is None else getattr(own, "rule_id", None)

    def ruled(self, env: EnvSpec, rule: str | None) -> EnvSpec:
        """``env`` carrying the declared outcome rule ``rule`` in its options (None: ``env`` itself)."""
        return env if rule is None else replace(env, options={**env.options, RULE_OPTION: rule})

    def ruled_scenarios(
        self, cfg: SourceConfig, items: list[envscaler.EnvItem], without: list[str] | None
    ) -> tuple[list[SourceTask], list[TaskIssue]]:
        """:meth:`scenarios`, each task's environment carrying the declared rule."""
        tasks, issues = self.scenarios(cfg, items, without)
        rule = self.declared_rule(cfg)
        return [replace(t, env=self.ruled(t.env, rule)) for t in tasks], issues

    def ruled_agent_tasks(self, cfg: SourceConfig, items: list[envscaler.EnvItem]) -> list[SourceTask]:
        """:meth:`agent_tasks`, each task's environment carrying the declared rule."""
        rule = self.declared_rule(cfg)
        return [replace(t, env=self.ruled(t.env, rule)) for t in self.agent_tasks(cfg, items)]

    def ruled_replay(self, cfg: SourceConfig) -> Iterator[Trajectory | TaskIssue]:
        """:meth:`replay`, each trajectory's environment carrying the declared rule."""
        rule = self.declared_rule(cfg)
        for t in self.replay(cfg):
            yield t if isinstance(t, TaskIssue) or rule is None else replace(t, env=self.ruled(t.env, rule))
