"""Build a live environment from an ``EnvSpec`` (used inside sandbox workers)."""

from __future__ import annotations

from typing import Any, Callable

from pipeline.envs import bfcl, envscaler
from pipeline.core.environment import EnvSpec, Environment


def _build_bfcl(spec: EnvSpec) -> tuple[Environment, dict[str, Any]]:
    env = bfcl.BfclEnvironment(spec.options["classes"], spec.options.get("excluded"))
    return env, {"long_context": bool(spec.options.get("long_context", False))}


def _build_envscaler(spec: EnvSpec) -> tuple[Environment, dict[str, Any]]:
    o = spec.options
    return envscaler.EnvScalerEnvironment(spec.env_id, o["class_name"], o["code_ref"], o["tools_ref"]), {}


BUILDERS: dict[str, Callable[[EnvSpec], tuple[Environment, dict[str, Any]]]] = {
    bfcl.SOURCE: _build_bfcl,
    envscaler.SOURCE: _build_envscaler,
}


def blob_refs(spec: EnvSpec) -> list[str]:
    """Content blobs (class code, tool schemas) a sandbox worker needs to build ``spec``."""
    return [spec.options[k] for k in ("code_ref", "tools_ref") if k in spec.options]

OUTCOME_RULES: dict[str, Callable[[str, bool, Any], str]] = {bfcl.SOURCE: bfcl.outcome, envscaler.SOURCE: envscaler.outcome}


def outcome_rule(source: str) -> Callable[[str, bool, Any], str]:
    """The source's outcome rule ``(tool, raised, canonical return value) -> outcome`` (docs/definitions.md §4.3)."""
    return _of_source(OUTCOME_RULES, source)


def _of_source(table: dict[str, Any], source: str) -> Any:
    """``table[source]``, or a KeyError that lists the known sources."""
    try:
        return table[source]
    except KeyError:
        raise KeyError(f"unknown environment source {source!r}; known: {sorted(table)}") from None


PRELOADERS: dict[str, Callable[[], None]] = {bfcl.SOURCE: bfcl.preload}


def static(spec: EnvSpec) -> Environment:
    """The environment without a reset: enough for tool schemas and source code."""
    return _of_source(BUILDERS, spec.source)(spec)[0]


def tool_schemas(spec: EnvSpec) -> list[dict[str, Any]]:
    """The OpenAI function schemas of ``spec``'s tools, as an agent is given them — the one place they come
    from for the collection agent, the rollout agent and the rollout SFT records: bfcl's tool docs of the
    task's classes without its excluded functions; for the EnvScaler format, the catalog's schemas
    (``environments.parquet``, registered by :func:`pipeline.envs.catalog.load_blobs`)."""
    return static(spec).tools


def code_versions() -> dict[str, str]:
    """Versions of the environment code behind each source (part of label cache keys; EnvScaler
    code is content-addressed through the trajectory fingerprint)."""
    versions = {}
    try:
        versions[bfcl.SOURCE] = bfcl.installed_version()
    except bfcl.BfclUnavailable:
        versions[bfcl.SOURCE] = "missing"
    return versions


def build(spec: EnvSpec) -> Environment:
    """Instantiate the environment and reset it to ``spec.init_config``."""
    env, reset_options = _of_source(BUILDERS, spec.source)(spec)
    env.reset(spec.init_config, **reset_options)
    return env


def preload_all() -> None:
    for name, preload in PRELOADERS.items():
        try:
            preload()
        except Exception:  # a missing optional source must not stop the others
            pass
