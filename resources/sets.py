"""The resources of the code location, chosen in one place (:func:`resources_for`): the deployment
(``Settings.launcher``: where GPU jobs run, ``local`` or ``slurm``) and the profile (``Settings.profile``, a file of
``pipeline/profiles/``), each of whose sections configures the resource named after it, validated here once. Every
value from the settings is passed explicitly, so no resource's field default reads the environment. The ``store``
resource's data root (configured at launch) is nested in the resources that keep files under it, so they follow it."""

from __future__ import annotations

from typing import Any

import pydantic
from dagster import ConfigurableResource, DagsterInvalidConfigError

from pipeline.core import profile
from pipeline.core.settings import Settings
from resources.composition import CompositionResource, RunPolicyResource
from resources.environments import EnvironmentSourcesResource
from resources.hub import HuggingFaceHubResource
from resources.sandbox import SandboxResource
from resources.storage import DataStoreDuckDBResource, DataStoreJobLauncherResource, DataStoreResource

#: the resources a profile's sections configure, by section: what builds each from its section's values
PROFILED = {"sources": EnvironmentSourcesResource, "composition": CompositionResource, "run_policy": RunPolicyResource}


def profiled(current: Settings, chosen: profile.Profile) -> dict[str, ConfigurableResource]:
    """The resources of the profile's sections (ENVSIM_STRICT over its run policy); a value the resource does not
    take is a :class:`~pipeline.core.profile.ProfileError`, one line naming the profile's file and the key."""
    out = {}
    for section, make in PROFILED.items():
        given = chosen.section(section)
        if section == "run_policy" and current.strict:
            given |= {"strict": True, "on_shortfall": "fail"}
        try:
            out[section] = make(**given)
        except (DagsterInvalidConfigError, ValueError, TypeError) as exc:
            if isinstance(exc, pydantic.ValidationError):
                loc, msg = exc.errors()[0]["loc"], exc.errors()[0]["msg"]
            else:  # Dagster's check of a nested section: its first error, without the schema it expected
                loc, msg = (), (exc.errors[0].message if isinstance(exc, DagsterInvalidConfigError) else str(exc))
            key = ".".join(str(p) for p in (section, *loc))
            raise profile.ProfileError(
                f"profile {chosen.name} ({chosen.path}): {key}: {msg.split('. Expected')[0]}"
            ) from None
    return out


def resources_for(current: Settings) -> dict[str, ConfigurableResource | Any]:
    """The resources of the settings' deployment, with the settings' profile's defaults: the store and what nests
    it, sources, composition, run policy, sandbox, Hub, and the launcher of GPU jobs (``Settings.launcher``)."""
    store = DataStoreResource.configure_at_launch(data_root=str(current.data_root))
    return {
        "store": store,
        **profiled(current, profile.named(current.profile)),
        "sandbox": SandboxResource.of(current),
        "duckdb": DataStoreDuckDBResource(store=store),
        "hub": HuggingFaceHubResource(),
        "launcher": DataStoreJobLauncherResource(
            store=store,
            backend=current.launcher or "local",
            partition=current.slurm_partition,
            slurm_conf=current.slurm_conf,
            llamafactory_python=current.llamafactory_python,
            serve_python=current.serve_python,
        ),
    }
