"""Which environment sources and tasks feed collection: one section per registered source, named after it
and derived from its settings dataclass (plugins' included), as simulator kinds have theirs."""

from dataclasses import fields

from dagster import ConfigurableResource
from pydantic import Field

from pipeline.core.fields import description
from pipeline.envs import registry
from pipeline.envs.config import SourceConfig
from pipeline.store.layout import DataLayout
from resources.config_from import domain_value, with_sections


class EnvironmentSourcesResource(ConfigurableResource):
    """The environment sources: one section per registered source, named after it (the plugins' too), with that
    source's settings (a list of them for a list source; :func:`source_sections`)."""

    message_histories: list[str] = Field(default_factory=list, description=description(fields(SourceConfig)[1]))

    def config(self, layout: DataLayout) -> SourceConfig:
        """The sources, each section completed by its source from ``layout``'s root (the ``store`` resource's:
        :meth:`pipeline.envs.source.EnvironmentSource.at_root`)."""
        sections = {}
        for source in registry.sources():
            if source.settings is None or source.name not in type(self).model_fields:
                continue
            value = domain_value(type(self).model_fields[source.name].annotation, getattr(self, source.name))
            sections[source.name] = source.at_root(value, layout.root)
        return registry.sources_config(self.message_histories, **sections)


def source_sections() -> bool:
    """A section in ``EnvironmentSourcesResource`` per registered source: whether one changed (``with_sections``)."""
    return with_sections(EnvironmentSourcesResource, registry.sources(), "source")


source_sections()
