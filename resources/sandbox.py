"""The sandbox that executes (untrusted) environment code."""

import os

from dagster import ConfigurableResource
from pydantic import Field

from pipeline.core.settings import Settings
from pipeline.execution.child import Limits
from pipeline.execution.sandbox import Sandbox
from resources.config_from import config_from


class SandboxResource(config_from(Limits, base=ConfigurableResource)):
    """Isolated worker processes (bwrap namespaces, seccomp, limits) with a wall-clock limit per call
    (limit fields: ``Limits``)."""

    workers: int = Field(
        default=max(1, os.cpu_count() or 1),
        description="Parallel worker processes (the code location's "
        "default: $ENVSIM_SANDBOX_WORKERS, else the CPU count).",
    )
    isolation: str = Field(
        default=Settings().sandbox,
        description="'bwrap' (default: namespaces, no network, read-only root, empty environment) or 'trusted' "
        "(no namespace boundary; only for environment code you trust). The code location's default: $ENVSIM_SANDBOX.",
    )

    @classmethod
    def of(cls, current: Settings) -> "SandboxResource":
        """The sandbox the settings ask for (``sandbox_workers``, else the CPU count; ``sandbox``)."""
        return cls(workers=current.sandbox_workers or max(1, os.cpu_count() or 1), isolation=current.sandbox)

    def limits(self) -> Limits:
        return self.to_domain()

    def open(self, workers: int | None = None) -> Sandbox:
        """A sandbox of this resource's isolation and limits, started at its first use (a step that finds nothing
        to execute starts no process); ``workers``: other than the resource's (1: one environment's code at a time,
        no neighbour running beside it)."""
        return Sandbox(workers=workers or self.workers, limits=self.limits(), isolation=self.isolation, lazy=True)
