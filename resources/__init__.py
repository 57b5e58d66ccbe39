"""Dagster ConfigurableResources: storage, environment sources, execution sandbox."""

from resources.composition import CompositionResource
from resources.environments import BfclTaskFileConfig, EnvironmentSourcesResource, EnvScalerCorpusConfig
from resources.hub import HuggingFaceHubResource
from resources.launcher import JobLauncherResource
from resources.sandbox import SandboxResource
from resources.storage import DataStoreResource

__all__ = [
    "BfclTaskFileConfig",
    "CompositionResource",
    "JobLauncherResource",
    "HuggingFaceHubResource",
    "EnvScalerCorpusConfig",
    "DataStoreResource",
    "EnvironmentSourcesResource",
    "SandboxResource",
]
