"""The environment protocol every source adapter implements (docs/definitions.md §3)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pipeline.core.canonical import JSONValue


@dataclass(frozen=True)
class CallResult:
    """What one tool call did: the raw return value or the exception it raised."""

    value: Any = None
    error_type: str | None = None
    error_message: str | None = None

    @property
    def raised(self) -> bool:
        return self.error_type is not None


@dataclass(frozen=True)
class EnvSpec:
    """Everything needed to rebuild an environment instance in a fresh process."""

    source: str  # adapter name, e.g. "bfcl"
    env_id: str
    init_config: dict[str, Any] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Environment(Protocol):
    """A stateful Python object whose public methods are tools."""

    env_id: str

    @property
    def tools(self) -> list[dict[str, Any]]:
        """OpenAI function-calling schemas of the tools."""

    def reset(self, init_config: dict[str, Any], **options: Any) -> None:
        """Start a fresh instance; ``init_config`` is deep-copied."""

    def call(self, name: str, arguments: dict[str, Any]) -> CallResult:
        """Execute a tool; exceptions are captured in the result, never raised."""

    def state(self) -> JSONValue:
        """Canonical JSON-able snapshot of the current state (docs/definitions.md §4.1)."""

    def observation(self, result: CallResult) -> str:
        """The observation text an agent sees for ``result`` (source-specific rendering)."""

    def outcome(self, name: str, result: CallResult) -> str:
        """``success`` | ``failure`` | ``error`` for a call (docs/definitions.md §4.3)."""

    def source_of(self, name: str) -> str:
        """Source code of the tool's implementation, ``code(a_t)``."""

    def class_source(self) -> str:
        """Source code of the whole environment."""

    def has_tool(self, name: str) -> bool:
        """Whether ``name`` is a tool of this environment."""

    def bind_arguments(self, name: str, args: list[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
        """Map positional + keyword arguments of a call onto parameter names."""
