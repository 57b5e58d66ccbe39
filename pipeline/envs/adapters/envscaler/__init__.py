"""The ``envscaler`` adapter: EnvScaler-format class code (:mod:`pipeline.envs.envscaler`), sent as a blob."""

from __future__ import annotations

import functools
from typing import Any

from pipeline.core.environment import Environment, EnvSpec
from pipeline.envs import blobs, builtin, envscaler
from pipeline.envs.adapters import Adapter


@functools.lru_cache(maxsize=1)
def _own_code_refs() -> frozenset[str]:
    """Content references of the builtin pack's code: the project's own, reviewed code (not a corpus's)."""
    return frozenset(blobs.ref_of(item["env_class_code"]) for item in builtin.env_items().values())


class EnvScalerAdapter(Adapter):
    """An EnvScaler-format class, built from its code, tool schemas and constructor (the spec's options)."""

    name = envscaler.SOURCE
    needs = ("class_name", "code_ref", "tools_ref")

    def build(self, spec: EnvSpec) -> tuple[Environment, dict[str, Any]]:
        o = spec.options
        env = envscaler.EnvScalerEnvironment(
            spec.env_id, o["class_name"], o["code_ref"], o["tools_ref"], o.get(envscaler.CONSTRUCTOR)
        )
        return env, {}

    def reuse_parts(self, env: EnvSpec) -> list[Any] | None:
        """Corpus code is untrusted: never shared — every trajectory runs in a child that has run nothing
        else (what a process that ran hostile code leaves behind cannot be recognised reliably). The builtin
        pack's code is the project's own, recognised by its content reference (a corpus environment that
        copies a builtin class's name is still a corpus's): shared across configurations, like bfcl's."""
        return [] if env.options.get("code_ref") in _own_code_refs() else None

    def clear_caches(self) -> None:
        envscaler._method_sources.cache_clear()
        builtin.env_items.cache_clear()
