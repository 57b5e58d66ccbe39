"""The sandbox that executes (untrusted) environment code."""

import os

from dagster import ConfigurableResource
from pydantic import Field

from pipeline.core.settings import settings
from pipeline.execution.child import Limits
from pipeline.execution.sandbox import Sandbox


class SandboxResource(ConfigurableResource):
    """Isolated worker processes (bwrap namespaces, seccomp, limits) with a wall-clock limit per call."""

    workers: int = Field(
        default_factory=lambda: settings().sandbox_workers or max(1, os.cpu_count() or 1),
        description="Parallel worker processes (default: $ENVSIM_SANDBOX_WORKERS, else the CPU count).",
    )
    call_timeout_s: float = Field(default=10.0, description="Wall-clock limit of one tool call (and of a reset).")
    memory_mb: int = Field(default=2048, description="Address-space allowance per trajectory process, MiB.")
    max_observation_chars: int = Field(default=65_536, description="Longer observations are truncated and flagged.")
    max_output_chars: int = Field(default=8_192, description="stdout/stderr kept per call; more raises in the call.")
    max_restarts: int = Field(default=3, description="Lost (hung/crashed) calls tolerated per trajectory.")
    max_state_mb: int = Field(default=16, description="Largest state (or return value) a call may produce, MiB.")
    tmp_mb: int = Field(default=256, description="Size of each worker's private /tmp (tmpfs), MiB.")
    isolation: str = Field(
        default_factory=lambda: settings().sandbox,
        description="'bwrap' (default: namespaces, no network, read-only root, empty environment) or 'trusted' "
        "(no namespace boundary; only for environment code you trust). Default: $ENVSIM_SANDBOX.",
    )

    def limits(self) -> Limits:
        return Limits(
            call_timeout_s=self.call_timeout_s,
            memory_mb=self.memory_mb,
            max_observation_chars=self.max_observation_chars,
            max_output_chars=self.max_output_chars,
            max_restarts=self.max_restarts,
            max_state_mb=self.max_state_mb,
            tmp_mb=self.tmp_mb,
        )

    def open(self) -> Sandbox:
        return Sandbox(workers=self.workers, limits=self.limits(), isolation=self.isolation)
