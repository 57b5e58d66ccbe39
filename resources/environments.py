"""Which environment sources and tasks feed collection."""

from pathlib import Path

from dagster import Config, ConfigurableResource
from pydantic import Field

from pipeline.core import profile
from pipeline.collect.sources import EnvScalerCorpus, SourceConfig
from pipeline.envs.bfcl_tasks import BfclTaskFile, default_task_files
from pipeline.envs.download import downloaded_corpus
from pipeline.store.layout import default_data_root


class BfclTaskFileConfig(Config):
    """A task file in bfcl's multi-turn format plus its ground-truth file."""

    tasks: str = Field(description="JSON-lines task file (id, involved_classes, initial_config, ...).")
    answers: str = Field(description="JSON-lines ground-truth file (id, ground_truth).")
    category: str = Field(default="custom", description="Category label; 'long_context' loads long-context scenarios.")


class EnvScalerCorpusConfig(Config):
    """A corpus in EnvScaler's released format, e.g. 191_env_metadata.json plus a scenario file."""

    env_items: str = Field(description="Env items: a JSON dict env_id -> item (191_env_metadata.json) or the Hub release "
                                       "(list of records; tools/env_func_details as JSON strings), JSON, JSON lines or Parquet.")
    scenarios: str | None = Field(default=None, description="Scenario/task items: JSON list, JSON lines, dict or Parquet; "
                                                              "init_config may be a JSON string.")
    more_scenarios: list[str] = Field(default_factory=list, description="Further scenario files (the Hub release has two: RL and SFT).")
    prefix: str = Field(default="envscaler", description="Namespace of the env ids: '<prefix>/<env_id>'.")
    license: str = Field(default="", description="License of the corpus, recorded in the catalog.")


def _corpus(c: EnvScalerCorpusConfig) -> EnvScalerCorpus:
    return EnvScalerCorpus(Path(c.env_items), Path(c.scenarios) if c.scenarios else None, c.prefix, c.license,
                           tuple(Path(f) for f in c.more_scenarios))


def _downloaded() -> list[EnvScalerCorpusConfig]:
    """The corpus ``./forge download envscaler`` recorded under the data root (none: empty)."""
    corpus = downloaded_corpus(default_data_root())
    if corpus is None:
        return []
    files = list(corpus.get("scenarios") or [])
    return [EnvScalerCorpusConfig(env_items=corpus["env_items"], scenarios=files[0] if files else None, more_scenarios=files[1:],
                                  prefix=corpus.get("prefix", "envscaler"), license=corpus.get("license", ""))]


class EnvironmentSourcesResource(ConfigurableResource):
    """The environment sources: bfcl-eval's multi-turn tasks, the builtin pack, EnvScaler corpora."""

    bfcl_categories: list[str] = Field(
        default_factory=lambda: list(profile.current().bfcl_categories), description="bfcl-eval multi-turn categories to use."
    )
    bfcl_task_files: list[BfclTaskFileConfig] = Field(
        default_factory=list, description="Extra task files in bfcl's format (your own tasks)."
    )
    bfcl_replay: bool = Field(default=True, description="Collect bfcl tasks by ground-truth replay.")
    bfcl_explore: bool = Field(default=False, description="Also explore bfcl task configs with the policy.")
    builtin: bool = Field(default=True, description="Use the builtin environment pack.")
    builtin_scenarios_per_env: int = Field(
        default_factory=lambda: profile.current().builtin_scenarios_per_env, description="Seeded scenarios generated per builtin env."
    )
    builtin_seed: int = Field(default=0, description="Seed of the builtin scenario generators.")
    envscaler: list[EnvScalerCorpusConfig] = Field(
        default_factory=lambda: _downloaded(),
        description="EnvScaler-format corpora (default: the one `./forge download envscaler` fetched into the data root, if any).",
    )
    explore_class_defaults: bool = Field(
        default=True, description="Explore corpus environments that no scenario names from their class defaults (init config {}).")
    message_histories: list[str] = Field(
        default_factory=list, description="JSON-lines files of recorded OpenAI message histories to replay (no model needed)."
    )

    def bfcl_files(self) -> list[BfclTaskFile]:
        files = default_task_files(self.bfcl_categories) if self.bfcl_categories else []
        files += [BfclTaskFile(f.category, Path(f.tasks), Path(f.answers)) for f in self.bfcl_task_files]
        return files

    def config(self) -> SourceConfig:
        return SourceConfig(
            bfcl_files=self.bfcl_files(),
            bfcl_replay=self.bfcl_replay,
            bfcl_explore=self.bfcl_explore,
            builtin=self.builtin,
            builtin_scenarios_per_env=self.builtin_scenarios_per_env,
            builtin_seed=self.builtin_seed,
            envscaler=[_corpus(c) for c in self.envscaler],
            message_histories=[Path(p) for p in self.message_histories],
            explore_class_defaults=self.explore_class_defaults,
        )
