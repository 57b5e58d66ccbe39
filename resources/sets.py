"""The resource sets of the code location, chosen in one place (Dagster's ``project_fully_featured``
pattern: one dict of resource sets, the deployment picks one).

A deployment is where GPU jobs run (``Settings.launcher``: ``local``, the default, or ``slurm``); the
profile (``Settings.profile``) gives the defaults of every set: its composition and bfcl categories.
Every value that flows from the settings is passed here explicitly, so a resource's own field defaults
never read the environment. The data root is the ``store`` resource's, configured at launch (default
``Settings.data_root``) and nested in the resources that keep files under it, so that they follow it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dagster import ConfigurableResource

from pipeline.core import profile
from pipeline.core.settings import Settings
from resources.composition import CompositionResource
from resources.environments import EnvironmentSourcesResource
from resources.hub import HuggingFaceHubResource
from resources.sandbox import SandboxResource
from resources.storage import DataStoreDuckDBResource, DataStoreJobLauncherResource, DataStoreResource


def _common(current: Settings, chosen: profile.Profile) -> dict[str, Any]:
    """What every deployment shares: the store and what nests it, sources, sandbox, composition, Hub."""
    store = DataStoreResource.configure_at_launch(data_root=str(current.data_root))
    return {
        "store": store,
        "sources": EnvironmentSourcesResource.of(chosen),
        "sandbox": SandboxResource.of(current),
        "composition": CompositionResource.of(chosen, strict=current.strict),
        "duckdb": DataStoreDuckDBResource(store=store),
        "hub": HuggingFaceHubResource(),
    }


def _launcher(backend: str) -> Callable[[Settings, profile.Profile], dict[str, Any]]:
    def resources(current: Settings, chosen: profile.Profile) -> dict[str, Any]:
        out = _common(current, chosen)
        out["launcher"] = DataStoreJobLauncherResource(
            store=out["store"],
            backend=backend,
            partition=current.slurm_partition,
            slurm_conf=current.slurm_conf,
            llamafactory_python=current.llamafactory_python,
            serve_python=current.serve_python,
        )
        return out

    resources.__doc__ = f"The resources with GPU jobs launched by the {backend} backend."
    return resources


#: the resource sets by deployment (``Settings.launcher``; unset: ``local``)
RESOURCE_SETS: dict[str, Callable[[Settings, profile.Profile], dict[str, Any]]] = {
    "local": _launcher("local"),
    "slurm": _launcher("slurm"),
}


def deployment(current: Settings) -> str:
    """The deployment the settings name (``launcher``, default ``local``)."""
    return current.launcher if current.launcher in RESOURCE_SETS else "local"


def profile_of(current: Settings) -> profile.Profile:
    """The profile the settings name; an unknown one is a ``ValueError`` naming the known ones."""
    return profile.named(current.profile)


def resources_for(current: Settings) -> dict[str, ConfigurableResource | Any]:
    """The resource set of the settings' deployment, with the settings' profile's defaults."""
    return RESOURCE_SETS[deployment(current)](current, profile_of(current))
