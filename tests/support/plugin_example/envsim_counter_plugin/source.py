"""The ``counter`` source: one counter environment in EnvScaler's format, built and run in the sandbox child
by the plugin's ``counter`` adapter (:mod:`envsim_counter_plugin.adapter`) from its code (sent as a blob). Its code
imports :mod:`envsim_counter_plugin.clock`, which the adapter preloads in the sandbox worker: the plugin's adapter is
registered there too, from its entry point."""

from __future__ import annotations

from dataclasses import dataclass, replace

from pipeline.core.fields import setting
from pipeline.core.issues import TaskIssue
from pipeline.envs import envscaler
from pipeline.envs.config import SourceConfig, SourceSettings
from pipeline.envs.records import FirstSeen
from pipeline.envs.source import EnvironmentSource, SourceTask

CODE = '''
from envsim_counter_plugin import clock


class Counter:
    """A counter that can be raised and reset."""

    def __init__(self, config=None):
        self.value = 0
        self.limit = 5

    def add(self, amount: int) -> dict:
        """Add amount to the counter.

        Args:
            amount: how much to add (1 to 3)
        """
        if not 1 <= amount <= 3 or self.value + amount > self.limit:
            return {"success": False, "error": "amount out of range"}
        self.value += amount
        return {"success": True, "value": self.value, "at": clock.stamp()}

    def reset(self) -> dict:
        """Set the counter back to zero."""
        self.value = 0
        return {"success": True, "value": 0}
'''


@dataclass(frozen=True)
class CounterSettings(SourceSettings):
    """The counter source's settings (its section ``counter:`` of the run config, ``[sources.counter]`` of a
    profile); like every source's, they may declare an ``outcome_rule``."""

    tasks: int = setting(4, "How many starting values exploration runs from.")


class CounterSource(EnvironmentSource):
    """One counter environment (:class:`CounterSettings`)."""

    name = "counter"  # the entry point's name; partitions counter-0, counter-1, …
    adapter = "counter"  # built and run by the plugin's adapter
    prefix = "counter"  # its env ids: counter/<env>
    license = "CC0-1.0"
    card_license = "CC0-1.0 (counter plugin)"
    settings = CounterSettings

    def env_items(self, cfg: SourceConfig, ids: FirstSeen) -> tuple[list[envscaler.EnvItem], list[TaskIssue]]:
        raw = {"env_class_name": "Counter", "env_class_code": CODE}
        item, issues = envscaler.split_item(
            envscaler.parse_env_item("counter", raw, "plugin:counter", self.prefix, self.license)
        )
        if item is None:
            return [], issues
        ids.seen(item.qualified_id, item.origin)
        return [replace(item, adapter=self.adapter)], issues

    def scenarios(
        self, cfg: SourceConfig, items: list[envscaler.EnvItem], without: list[str] | None
    ) -> tuple[list[SourceTask], list[TaskIssue]]:
        text = "Raise the counter to its limit, then reset it."
        return [
            SourceTask(f"counter-{i}", item.spec({"value": i}), (text,), text=text)
            for item in items
            if item.qualified_id == "counter/counter"
            for i in range(cfg.of(self).tasks)
        ], []
