"""The run's source settings: each registered source's own settings value, by source name (``resources.sources``
in Dagster: one section per source). A source declares its settings as a dataclass
(:attr:`pipeline.envs.source.EnvironmentSource.settings`, a list of them when ``many``), whose defaults are the
``default`` profile's (a profile changes them in ``[sources.<name>]``); every one may declare an ``outcome_rule``
(:class:`SourceSettings`). ``message_histories`` belong to no source: they replay on environments of any source.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.core.fields import DESCRIPTION, setting
from pipeline.core.outcome import OutcomeRuleError, parse_rule
from pipeline.envs import envscaler


class SourceError(ValueError):
    """A configured source that cannot be used: its file is missing or unreadable, or it yields no
    environment, or its outcome rule is not valid. The message names the config key, the file and what to do."""


@dataclass(frozen=True)
class SourceSettings:
    """What every source's settings may hold (subclass it): the outcome rule of its environments' steps."""

    outcome_rule: dict[str, Any] | None = dataclasses.field(
        default=None,
        kw_only=True,
        metadata={
            DESCRIPTION: "How this source reports a refused call, when the default rule (docs/definitions.md §4.3) "
            "does not know its convention: {failure_if: [{key: status, equals: false}, {key: code, in: [400, 404]}, "
            "{text_starts_with: 'Sorry'}], extends_default: true} (docs/environments.md). Unset: the default rule."
        },
    )

    def __post_init__(self) -> None:
        rule_id = None
        if self.outcome_rule is not None:
            try:
                rule_id = parse_rule(self.outcome_rule).id
            except OutcomeRuleError as exc:
                raise SourceError(f"{self.where()}: {exc}") from None
        object.__setattr__(self, "_rule_id", rule_id)  # parsed once, here: what every spec of the source carries

    def where(self) -> str:
        """Where these settings are in the run config, for a message."""
        return f"resources.sources.config ({type(self).__name__})"

    @property
    def rule_id(self) -> str | None:
        """The declared outcome rule as its environments' specs carry it (``OutcomeRule.id``); None: the default."""
        return self._rule_id  # type: ignore[attr-defined]


@dataclass(frozen=True)
class EnvScalerCorpus(SourceSettings):
    """A corpus in EnvScaler's released format, e.g. 191_env_metadata.json plus a scenario file."""

    env_items: Path = setting(
        description="Env items: a JSON dict env_id -> item (191_env_metadata.json) or the Hub "
        "release (list of records; tools/env_func_details as JSON strings), JSON, JSON lines or Parquet."
    )
    scenarios: Path | None = setting(
        None, "Scenario/task items: JSON list, JSON lines, dict or Parquet; init_config may be a JSON string."
    )
    prefix: str = setting(envscaler.SOURCE, "Namespace of the env ids: '<prefix>/<env_id>'.")
    license: str = setting("", "License of the corpus, recorded in the catalog.")
    more_scenarios: tuple[Path, ...] = setting((), "Further scenario files (the Hub release has two: RL and SFT).")
    explore_class_defaults: bool = setting(
        True, "Explore the environments that no scenario names from their class defaults (init config {})."
    )

    def where(self) -> str:
        return f"resources.sources.config.envscaler (env_items {self.env_items})"

    def scenario_files(self) -> list[Path]:
        return ([self.scenarios] if self.scenarios is not None else []) + list(self.more_scenarios)


@dataclass(frozen=True)
class SourceConfig:
    """The settings of a run's sources, by source name (a source the run names none of: its defaults)."""

    sections: Mapping[str, Any] = setting(factory=dict, description="Each source's settings value, by source name.")
    message_histories: list[Path] = setting(
        factory=list, description="JSON-lines files of recorded OpenAI message histories to replay (no model needed)."
    )

    def of(self, source: Any) -> Any:
        """The settings of ``source`` (an ``EnvironmentSource``): the run's, else its settings' defaults
        (a list source: none); None for a source without settings."""
        if source.name in self.sections:
            return self.sections[source.name]
        if source.many:
            return []
        make = source.settings  # a class (its defaults), not the process settings
        return make() if make is not None else None
