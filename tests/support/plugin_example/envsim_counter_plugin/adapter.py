"""The ``counter`` adapter: EnvScaler-format class code (sent to the sandbox child as a blob) that may import this
package, which the sandbox worker preloads before the fork (its ``preload``); the frozen clock rebinds the names
those modules bound early because the adapter declares this package in ``modules``."""

from __future__ import annotations

import importlib

from pipeline.envs.adapters.envscaler import EnvScalerAdapter


class CounterAdapter(EnvScalerAdapter):
    """The envscaler adapter, with this package's helper modules preloaded in the sandbox worker."""

    name = "counter"  # the entry point's name; the ``EnvSpec.source`` (and ``adapter`` column) of its environments
    modules = ("envsim_counter_plugin",)

    def preload(self) -> None:
        importlib.import_module("envsim_counter_plugin.clock")  # in the sandbox worker, before the fork
