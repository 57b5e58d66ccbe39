"""Which environment sources and tasks feed collection: one section per registered source, named after it
and derived from its settings dataclass (plugins' included), as simulator kinds have theirs."""

from dataclasses import fields
from typing import Any

import pydantic
from dagster import ConfigurableResource
from pydantic import Field

from pipeline.core.fields import description
from pipeline.envs import registry
from pipeline.envs.config import SourceConfig
from pipeline.store.layout import DataLayout
from resources.config_from import config_sections

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
    """The environment sources: one section per registered source, named after it (the plugins' too), with that
    source's settings (a list of them for a list source)."""

    def config(self, layout: DataLayout) -> SourceConfig:
        """The sources, each section completed by its source from ``layout``'s root (the ``store`` resource's:
        :meth:`pipeline.envs.source.EnvironmentSource.at_root`)."""
        sections = {}
        for source in registry.sources():
            if source.settings is None or source.name not in type(self).model_fields:
                continue
            value = getattr(self, source.name)
            if source.many:
                value = None if value is None else [v.to_domain() for v in value]
            else:
                value = value.to_domain()
            sections[source.name] = source.at_root(value, layout.root)
        return registry.sources_config(self.message_histories, **sections)


def sources_resource(**given: Any) -> EnvironmentSourcesResource:
    """The sources resource with ``given`` config and a section for every source registered now: one registered in
    code after this module was imported gets its section here (its settings' config, as the others have theirs); the
    code location builds its resource so (``resources.sets``)."""
    late = [s for s in registry.sources() if s.name not in EnvironmentSourcesResource.model_fields]
    sections = config_sections(late, "source")
    if not sections:
        return EnvironmentSourcesResource(**given)
    cls = pydantic.create_model(
        "EnvironmentSourcesResource", __base__=EnvironmentSourcesResource, __module__=__name__, **sections
    )
    return cls(**given)
