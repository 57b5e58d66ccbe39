"""The ``bfcl`` adapter: bfcl-eval's classes from the installed package (:mod:`pipeline.envs.bfcl`)."""

from __future__ import annotations

from typing import Any

from pipeline.core.environment import Environment, EnvSpec
from pipeline.envs import bfcl
from pipeline.envs.adapters import Adapter


class BfclAdapter(Adapter):
    """bfcl-eval's classes, named by the spec's ``classes`` option."""

    name = bfcl.SOURCE
    needs = ("classes",)
    modules = ("bfcl_eval",)
    stateful_modules = ("bfcl_eval.eval_checker.multi_turn_eval.func_source_code",)

    def build(self, spec: EnvSpec) -> tuple[Environment, dict[str, Any]]:
        env = bfcl.BfclEnvironment(spec.options["classes"], spec.options.get("excluded"))
        return env, {"long_context": bool(spec.options.get("long_context", False))}

    def preload(self) -> None:
        bfcl.preload()

    def code_version(self) -> str | None:
        try:
            return bfcl.installed_version()
        except bfcl.BfclUnavailable:
            return "missing"

    def reuse_parts(self, env: EnvSpec) -> list[Any] | None:
        """bfcl's code is the installed package's, not the dataset's: a configuration is data its own
        code loads, and its module state is restored from a pristine copy before every reused
        trajectory (:mod:`pipeline.execution.pristine`): trajectories of one environment share children
        across configurations."""
        return []
