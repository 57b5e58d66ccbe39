"""Which environment sources and tasks feed collection: one section per registered source, named after it
and derived from its settings dataclass (plugins' included), as simulator kinds have theirs."""

from dataclasses import fields

import pydantic
from dagster import ConfigurableResource
from pydantic import Field

from pipeline.core.fields import description
from pipeline.envs import envscaler, registry
from pipeline.envs.config import EnvScalerCorpus, SourceConfig
from pipeline.envs.download import downloaded_corpus
from pipeline.store.layout import DataLayout
from resources.config_from import config_sections


def _downloaded(layout: DataLayout) -> list[EnvScalerCorpus]:
    """The corpus ``./forge download envscaler`` recorded under the data root (none: empty)."""
    corpus = downloaded_corpus(layout.root)
    if corpus is None:
        return []
    files = list(corpus.get("scenarios") or [])
    return [
        EnvScalerCorpus(
            env_items=corpus["env_items"],
            scenarios=files[0] if files else None,
            more_scenarios=tuple(files[1:]),
            prefix=corpus.get("prefix", "envscaler"),
            license=corpus.get("license", ""),
        )
    ]


_SourceSections = pydantic.create_model(
    "SourceSections",
    __base__=ConfigurableResource,
    __module__=__name__,
    **config_sections(registry.sources(), "source"),
    message_histories=(
        list[str],
        Field(default_factory=list, description=description(fields(SourceConfig)[1])),
    ),
)


class EnvironmentSourcesResource(_SourceSections):
    """The environment sources: one section per registered source, named after it (``bfcl``, ``builtin``,
    ``envscaler`` — a list of corpora —, and each plugin source's), with that source's settings."""

    def corpora(self, layout: DataLayout) -> list[EnvScalerCorpus]:
        """``envscaler`` as configured, unset: the corpus downloaded under ``layout``'s root (the store's)."""
        given = getattr(self, envscaler.SOURCE)
        return [c.to_domain() for c in given] if given is not None else _downloaded(layout)

    def config(self, layout: DataLayout) -> SourceConfig:
        """The sources, the downloaded corpus read from ``layout`` (the ``store`` resource's)."""
        sections = {}
        for source in registry.sources():
            if source.settings is None or source.name not in type(self).model_fields:
                continue
            value = getattr(self, source.name)
            if source.name == envscaler.SOURCE:
                sections[source.name] = self.corpora(layout)
            elif source.many:
                sections[source.name] = [v.to_domain() for v in value or []]
            else:
                sections[source.name] = source.at_root(value.to_domain(), layout.root)
        return registry.sources_config(self.message_histories, **sections)
