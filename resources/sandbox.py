"""The sandbox that executes (untrusted) environment code."""

import os

from dagster import ConfigurableResource
from pydantic import Field

from pipeline.core.settings import settings
from pipeline.execution.child import Limits
from pipeline.execution.sandbox import Sandbox
from resources.config_from import config_from


class SandboxResource(config_from(Limits, base=ConfigurableResource)):
    """Isolated worker processes (bwrap namespaces, seccomp, limits) with a wall-clock limit per call
    (limit fields: ``Limits``)."""

    workers: int = Field(
        default_factory=lambda: settings().sandbox_workers or max(1, os.cpu_count() or 1),
        description="Parallel worker processes (default: $ENVSIM_SANDBOX_WORKERS, else the CPU count).",
    )
    isolation: str = Field(
        default_factory=lambda: settings().sandbox,
        description="'bwrap' (default: namespaces, no network, read-only root, empty environment) or 'trusted' "
        "(no namespace boundary; only for environment code you trust). Default: $ENVSIM_SANDBOX.",
    )

    def limits(self) -> Limits:
        return self.to_domain()

    def open(self) -> Sandbox:
        return Sandbox(workers=self.workers, limits=self.limits(), isolation=self.isolation)
