"""The run's source settings: what the registered sources read (``resources.sources`` in Dagster).

Each source reads its own fields (:mod:`pipeline.envs.sources`); their profile-dependent defaults
live with the source (:func:`pipeline.envs.bfcl_tasks.profile_categories`,
:func:`pipeline.envs.builtin.profile_scenarios_per_env`). A field's default here is the ``default``
profile's; the profile in force is passed down by the ``sources`` resource (``resources.sets``).
``message_histories`` belong to no source: they replay recorded conversations on environments of any source.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.core.fields import setting
from pipeline.core.outcome import OutcomeRuleError, parse_rule
from pipeline.envs import envscaler
from pipeline.envs.bfcl_tasks import BfclTaskFile, default_task_files, profile_categories
from pipeline.envs.builtin import profile_scenarios_per_env


class SourceError(ValueError):
    """A configured source that cannot be used: its file is missing or unreadable, or it yields no
    environment, or its outcome rule is not valid. The message names the config key, the file and what to do."""


@dataclass(frozen=True)
class EnvScalerCorpus:
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
    outcome_rule: dict[str, Any] | None = setting(
        None,
        "How this corpus reports a refused call, when the default rule (docs/definitions.md §4.3) does not "
        "know its convention: {failure_if: [{key: status, equals: false}, {key: code, in: [400, 404]}, "
        "{text_starts_with: 'Sorry'}], extends_default: true} (docs/environments.md). Unset: the default rule.",
    )

    def __post_init__(self) -> None:
        if self.outcome_rule is not None:
            try:
                parse_rule(self.outcome_rule)
            except OutcomeRuleError as exc:
                raise SourceError(f"resources.sources.config.envscaler (env_items {self.env_items}): {exc}") from None

    def scenario_files(self) -> list[Path]:
        return ([self.scenarios] if self.scenarios is not None else []) + list(self.more_scenarios)

    @property
    def rule_id(self) -> str | None:
        """The declared outcome rule as its environments' specs carry it (``OutcomeRule.id``); None: the default."""
        return None if self.outcome_rule is None else parse_rule(self.outcome_rule).id


@dataclass(frozen=True)
class SourceConfig:
    """The environment sources: bfcl-eval's multi-turn tasks, the builtin pack, EnvScaler corpora."""

    bfcl_files: list[BfclTaskFile] = setting(
        factory=lambda: default_task_files(profile_categories()),
        description="bfcl-eval task files (default: the `default` profile's categories).",
    )
    bfcl_replay: bool = setting(True, "Collect bfcl tasks by ground-truth replay.")
    bfcl_explore: bool = setting(False, "Also explore bfcl task configs with the policy.")
    builtin: bool = setting(True, "Use the builtin environment pack.")
    builtin_scenarios_per_env: int = setting(
        factory=profile_scenarios_per_env,
        description="Seeded scenarios generated per builtin env (default: the `default` profile's).",
    )
    builtin_seed: int = setting(0, "Seed of the builtin scenario generators.")
    envscaler: list[EnvScalerCorpus] = setting(factory=list, description="EnvScaler-format corpora.")
    message_histories: list[Path] = setting(
        factory=list, description="JSON-lines files of recorded OpenAI message histories to replay (no model needed)."
    )
    explore_class_defaults: bool = setting(
        True, "Explore corpus environments that no scenario names from their class defaults (init config {})."
    )
