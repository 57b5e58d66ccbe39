"""The adapter protocol: how the environments of one format are built and run in the sandbox child (docs/extending.md
"Add an environment source"). One :class:`Adapter` subclass per format in ``pipeline/envs/adapters/<format>/``,
registered in :mod:`pipeline.envs.registry` (``ADAPTERS``) or by an ``envsim_forge.adapters`` entry point."""

from __future__ import annotations

from typing import Any, ClassVar

from pipeline.core.environment import Environment, EnvSpec
from pipeline.core.outcome import default_outcome


class Adapter:
    """One environment format. Defaults: no options needed, the default outcome rule, nothing preloaded, no code
    version, never shared."""

    name: ClassVar[str]  # the ``EnvSpec.source`` of its environments, the ``adapter`` column of the tables
    #: options an ``EnvSpec`` of this adapter must carry (a recorded history's env is checked against them)
    needs: ClassVar[tuple[str, ...]] = ()
    #: prefixes of the modules it imports in the sandbox worker before the fork (its ``preload``): the frozen
    #: clock rebinds the names they bound early (``from datetime import datetime``, :mod:`pipeline.execution.freeze`)
    modules: ClassVar[tuple[str, ...]] = ()
    #: those of ``modules`` whose module-level state a reused child restores (:mod:`pipeline.execution.pristine`)
    stateful_modules: ClassVar[tuple[str, ...]] = ()

    def build(self, spec: EnvSpec) -> tuple[Environment, dict[str, Any]]:
        """A live environment of ``spec`` (not reset) and the keyword options of its reset."""
        raise NotImplementedError

    def outcome(self, tool: str, raised: bool, value: Any) -> str:
        """The outcome rule ``(tool, raised, canonical return value) -> outcome`` (docs/definitions.md §4.3)."""
        return default_outcome(tool, raised, value)

    def preload(self) -> None:
        """Import what every child needs, once in the sandbox zygote before forking."""

    def code_version(self) -> str | None:
        """The version of the environment code (part of label cache keys); None: content-addressed otherwise."""
        return None

    def blob_refs(self, spec: EnvSpec) -> list[str]:
        """Content blobs (class code, tool schemas) a sandbox worker needs to build ``spec``."""
        return [spec.options[k] for k in ("code_ref", "tools_ref") if k in spec.options]

    def reuse_parts(self, env: EnvSpec) -> list[Any] | None:
        """What besides the environment id must match for trajectories to share a forked child
        (:func:`pipeline.envs.registry.reuse_key`); None: never shared."""
        return None

    def clear_caches(self) -> None:
        """Forget parsed code of other environments (in a child, before it runs its own)."""
