"""The registries of environment sources (:class:`pipeline.envs.source.EnvironmentSource`) and adapters
(:class:`pipeline.envs.adapters.Adapter`), and what the pipeline asks them. Each entry is a line below, or a plugin's
``envsim_forge.sources`` / ``envsim_forge.adapters`` entry point (:mod:`pipeline.core.registry`, docs/extending.md);
:func:`register` adds a source in this process only. The order (partition keys, catalog): these, then the plugins
by entry-point name."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from contextlib import suppress
from pathlib import Path
from typing import Any

from pipeline.core.environment import Environment, EnvSpec
from pipeline.core.outcome import Labeler, labeler
from pipeline.core.registry import Registry
from pipeline.envs.adapters import Adapter
from pipeline.envs.adapters.bfcl import BfclAdapter
from pipeline.envs.adapters.envscaler import EnvScalerAdapter
from pipeline.envs.config import SourceConfig
from pipeline.envs.source import EnvironmentSource
from pipeline.envs.sources.bfcl import BfclSource
from pipeline.envs.sources.builtin import BuiltinSource
from pipeline.envs.sources.envscaler import EnvScalerSource
from pipeline.envs.sources.served import ServedSource
from pipeline.store import glossary

#: every adapter by name (the ``adapter`` column's values): these, then the plugins' (``envsim_forge.adapters``)
ADAPTERS: Registry[Adapter] = Registry(
    "environment adapter",
    "envsim_forge.adapters",
    check=lambda entry: isinstance(entry, Adapter),
    on_add=lambda adapter: glossary.declare("adapter", adapter.name),
    on_remove=lambda adapter: glossary.retract("adapter", adapter.name),
)
ADAPTERS.register(BfclAdapter())
ADAPTERS.register(EnvScalerAdapter())

#: every environment source by name: the ones below, then the installed plugins' (``envsim_forge.sources``)
SOURCES: Registry[EnvironmentSource] = Registry(
    "environment source",
    "envsim_forge.sources",
    check=lambda entry: isinstance(entry, EnvironmentSource),
    on_add=lambda source: glossary.declare("source", source.name),  # the documented value set of `source`
    on_remove=lambda source: glossary.retract("source", source.name),
)


def register(source: EnvironmentSource) -> EnvironmentSource:
    """Add ``source`` (after the others; its name must be new). Returns it."""
    return SOURCES.register(source)


def unregister(name: str) -> None:
    """Remove the source ``name`` (a test's temporary source)."""
    SOURCES.unregister(name)


register(BfclSource())
register(BuiltinSource())
register(EnvScalerSource())
register(ServedSource())


def sources() -> list[EnvironmentSource]:
    """Every registered source, in registry order."""
    return SOURCES.values()


def names() -> tuple[str, ...]:
    """The registered sources' names, in registry order (the partition sources)."""
    return SOURCES.names()


def get(name: str) -> EnvironmentSource:
    """The source ``name``, or a KeyError that lists the known sources."""
    return SOURCES.get(name)


def _settings(source: EnvironmentSource, value: Any) -> Any:
    """``value`` as ``source``'s settings (it has some): the value itself, or a mapping of its fields."""
    try:
        return value if isinstance(value, source.settings) else source.settings(**value)
    except TypeError as exc:
        raise ValueError(f"resources.sources.config.{source.name}: {exc}") from None


def sources_config(message_histories: Iterable[str | Path] = (), **sections: Any) -> SourceConfig:
    """A :class:`SourceConfig` from each source's section by source name (its settings value or a mapping of its
    fields; a list of them for a list source); a key that is no source's is a ``ValueError`` naming where it went."""
    values: dict[str, Any] = {}
    for name, value in sections.items():
        source = SOURCES.find(name)
        if source is None or source.settings is None:
            raise ValueError(
                f"resources.sources.config.{name}: not a source with settings; those: "
                + ", ".join(s.name for s in SOURCES.values() if s.settings is not None)
            )
        values[name] = [_settings(source, v) for v in value] if source.many else _settings(source, value)
    return SourceConfig(values, [Path(p) for p in message_histories])


def source_of(env: EnvSpec) -> str:
    """The source an environment belongs to (its shard is chosen within it, ``pipeline.store.partitions``): the
    source of its adapter whose prefix its id carries, else its adapter's source without one (else its first)."""
    return source_of_id(env.source, env.env_id)


def source_of_id(adapter_name: str, env_id: str) -> str:
    """:func:`source_of` by adapter and environment id."""
    head = env_id.split("/", 1)[0] if "/" in env_id else None
    own = [s for s in SOURCES.values() if s.adapter == adapter_name]
    if not own:
        raise KeyError(f"no environment source of the adapter {adapter_name!r}; adapters: {sorted(ADAPTERS)}")
    return min(own, key=lambda s: (s.prefix != head, s.prefix is not None)).name


def licenses() -> dict[str, str]:
    """The dataset card's license line per source that has one."""
    return {s.name: s.card_license for s in SOURCES.values() if s.card_license}


def blob_refs(spec: EnvSpec) -> list[str]:
    """Content blobs (class code, tool schemas) a sandbox worker needs to build ``spec``."""
    return ADAPTERS[spec.source].blob_refs(spec)


def outcome_rule(env: EnvSpec) -> Labeler:
    """The outcome rule of ``env``'s steps (docs/definitions.md §4.3): its adapter's rule
    ``(tool, raised, canonical return value) -> outcome``, under its corpus's declared rule when the
    spec carries one (``pipeline.core.outcome.RULE_OPTION``); its ``id`` is what each step records."""
    return labeler(ADAPTERS[env.source].outcome, env.options)


def build_without_reset(spec: EnvSpec) -> Environment:
    """The environment built but not reset to a configuration: enough for its tool schemas and source code
    (:func:`build` also resets it)."""
    return ADAPTERS[spec.source].build(spec)[0]


def tool_schemas(spec: EnvSpec) -> list[dict[str, Any]]:
    """The OpenAI function schemas of ``spec``'s tools, as every agent and the rollout SFT records are given them
    (EnvScaler format: the catalog's, registered by :func:`pipeline.envs.catalog.load_blobs`)."""
    return build_without_reset(spec).tools


def code_versions() -> dict[str, str]:
    """Versions of the environment code behind each adapter that has one (part of label cache keys;
    EnvScaler code is content-addressed through the trajectory fingerprint)."""
    return {a.name: v for a in ADAPTERS.values() if (v := a.code_version()) is not None}


def build(spec: EnvSpec) -> Environment:
    """Instantiate the environment and reset it to ``spec.init_config``."""
    env, reset_options = ADAPTERS[spec.source].build(spec)
    env.reset(spec.init_config, **reset_options)
    return env


def reuse_key(env: EnvSpec) -> tuple[str, ...] | None:
    """Which trajectories may share a forked child, one after the other: the same environment (adapter and id) and
    what its adapter adds (:meth:`pipeline.envs.adapters.Adapter.reuse_parts`); None: never shared. The worker keys
    its warm children by it (:class:`pipeline.execution.sandbox.Sandbox`)."""
    found = ADAPTERS.find(env.source)
    parts = None if found is None else found.reuse_parts(env)
    if parts is None:
        return None
    text = json.dumps(parts, sort_keys=True, default=repr, ensure_ascii=True)
    return (env.source, env.env_id, hashlib.blake2b(text.encode(), digest_size=16).hexdigest())


def module_prefixes() -> tuple[str, ...]:
    """The prefixes of the environment modules the adapters import in the sandbox worker before the fork
    (:attr:`pipeline.envs.adapters.Adapter.modules`): where the frozen clock rebinds early-bound names."""
    return tuple(dict.fromkeys(p for a in ADAPTERS.values() for p in a.modules))


def stateful_module_prefixes() -> tuple[str, ...]:
    """The prefixes of the environment modules whose module-level state a reused child restores
    (:attr:`pipeline.envs.adapters.Adapter.stateful_modules`)."""
    return tuple(dict.fromkeys(p for a in ADAPTERS.values() for p in a.stateful_modules))


def preload_all() -> None:
    """Every adapter's preload (in the sandbox zygote); a missing optional one does not stop the others."""
    for found in ADAPTERS.values():
        with suppress(Exception):
            found.preload()


def clear_caches() -> None:
    """Every adapter's parse caches (a child forgets the code of other environments)."""
    for found in ADAPTERS.values():
        found.clear_caches()
