"""Dagster ConfigurableResources: storage, environment sources, execution sandbox."""

from resources.composition import CompositionResource, RunPolicyResource
from resources.environments import EnvironmentSourcesResource
from resources.hub import HuggingFaceHubResource
from resources.launcher import JobLauncherResource
from resources.sandbox import SandboxResource
from resources.storage import DataStoreResource

__all__ = [
    "CompositionResource",
    "JobLauncherResource",
    "HuggingFaceHubResource",
    "DataStoreResource",
    "EnvironmentSourcesResource",
    "RunPolicyResource",
    "SandboxResource",
]
