"""Which environment sources and tasks feed collection."""

from dagster import ConfigurableResource
from pydantic import Field

from pipeline.core import profile
from pipeline.envs.bfcl_tasks import BfclTaskFile, default_task_files, profile_categories
from pipeline.envs.builtin import profile_scenarios_per_env
from pipeline.envs.config import EnvScalerCorpus, SourceConfig
from pipeline.envs.download import downloaded_corpus
from pipeline.store.layout import DataLayout
from resources.config_from import config_from


class BfclTaskFileConfig(config_from(BfclTaskFile)):
    """A task file in bfcl's multi-turn format plus its ground-truth file (fields: ``BfclTaskFile``)."""


class EnvScalerCorpusConfig(config_from(EnvScalerCorpus)):
    """A corpus in EnvScaler's released format (fields: ``EnvScalerCorpus``)."""


def _downloaded(layout: DataLayout) -> list[EnvScalerCorpusConfig]:
    """The corpus ``./forge download envscaler`` recorded under the data root (none: empty)."""
    corpus = downloaded_corpus(layout.root)
    if corpus is None:
        return []
    files = list(corpus.get("scenarios") or [])
    return [
        EnvScalerCorpusConfig(
            env_items=corpus["env_items"],
            scenarios=files[0] if files else None,
            more_scenarios=files[1:],
            prefix=corpus.get("prefix", "envscaler"),
            license=corpus.get("license", ""),
        )
    ]


class EnvironmentSourcesResource(
    config_from(SourceConfig, exclude={"bfcl_files", "envscaler"}, base=ConfigurableResource)
):
    """The environment sources: bfcl-eval's multi-turn tasks, the builtin pack, EnvScaler corpora
    (fields: ``SourceConfig``; its bfcl task files are given as categories plus files of your own)."""

    bfcl_categories: list[str] = Field(
        default_factory=lambda: list(profile_categories()),
        description="bfcl-eval multi-turn categories to use (the code location's default: the profile's).",
    )
    bfcl_task_files: list[BfclTaskFileConfig] = Field(
        default_factory=list, description="Extra task files in bfcl's format (your own tasks)."
    )
    envscaler: list[EnvScalerCorpusConfig] | None = Field(
        default=None,
        description="EnvScaler-format corpora (unset: the one `./forge download envscaler` fetched into the "
        "store's data root, if any).",
    )

    @classmethod
    def of(cls, chosen: profile.Profile) -> "EnvironmentSourcesResource":
        """The sources of the profile ``chosen``: every source default the profile changes."""
        return cls(
            bfcl_categories=list(profile_categories(chosen.name)),
            builtin_scenarios_per_env=profile_scenarios_per_env(chosen.name),
        )

    def bfcl_files(self) -> list[BfclTaskFile]:
        files = default_task_files(self.bfcl_categories) if self.bfcl_categories else []
        files += [f.to_domain() for f in self.bfcl_task_files]
        return files

    def corpora(self, layout: DataLayout) -> list[EnvScalerCorpusConfig]:
        """``envscaler`` as configured, unset: the corpus downloaded under ``layout``'s root (the store's)."""
        return self.envscaler if self.envscaler is not None else _downloaded(layout)

    def config(self, layout: DataLayout) -> SourceConfig:
        """The sources, the downloaded corpus read from ``layout`` (the ``store`` resource's)."""
        return self.to_domain(bfcl_files=self.bfcl_files(), envscaler=[c.to_domain() for c in self.corpora(layout)])
