"""A toy environment source, as a user adds one: this module plus one line,
``registry.register(ToySource())``. Its one environment is a counter with two tools, in EnvScaler's
format, so the sandbox child builds it with the ``envscaler`` adapter from its code (sent as a blob):
nothing of this module is imported in the child."""

from __future__ import annotations

from pipeline.core.issues import TaskIssue
from pipeline.envs import envscaler
from pipeline.envs.config import SourceConfig
from pipeline.envs.records import FirstSeen
from pipeline.envs.source import EnvironmentSource, SourceTask

CODE = '''
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
        return {"success": True, "value": self.value}

    def reset(self) -> dict:
        """Set the counter back to zero."""
        self.value = 0
        return {"success": True, "value": 0}
'''


class ToySource(EnvironmentSource):
    """One counter environment; its settings are its constructor's (``tasks``)."""

    name = "toy"
    adapter = envscaler.SOURCE
    prefix = "toy"
    license = "CC0-1.0"
    card_license = "CC0-1.0 (toy counter)"

    def __init__(self, tasks: int = 3) -> None:
        self.tasks = tasks

    def env_items(self, cfg: SourceConfig, ids: FirstSeen) -> tuple[list[envscaler.EnvItem], list[TaskIssue]]:
        raw = {"env_class_name": "Counter", "env_class_code": CODE}
        item, issues = envscaler.split_item(
            envscaler.parse_env_item("counter", raw, "toy:counter", self.prefix, self.license)
        )
        assert item is not None, issues
        ids.seen(item.qualified_id, item.origin)
        return [item], issues

    def scenarios(
        self, cfg: SourceConfig, items: list[envscaler.EnvItem], without: list[str] | None
    ) -> tuple[list[SourceTask], list[TaskIssue]]:
        item = next(i for i in items if i.qualified_id == "toy/counter")
        return [
            SourceTask(
                f"toy-{i}",
                item.spec({"value": i}),
                ("Raise the counter to its limit.",),
                text="Raise the counter to its limit.",
            )
            for i in range(self.tasks)
        ], []
