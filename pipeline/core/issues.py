"""Input that could not be used: a task, a line, an environment — with the stage that rejected it and why."""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True)
class TaskIssue:
    """A task (or line) that could not be used, and why (``trajectory_id``: the trajectory, once there is one);
    ``dataclasses.asdict`` of it is a row of the issues tables."""

    task_id: str
    stage: str
    reason: str
    origin: str = ""
    trajectory_id: str | None = None

    def __post_init__(self) -> None:
        # Text from a file that is not UTF-8 carries its bad bytes as lone surrogates: shown escaped
        # (``\udcff``), so the issue can be logged and written to Parquet.
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, str):
                object.__setattr__(self, f.name, value.encode("utf-8", "backslashreplace").decode("utf-8"))
            elif value is not None:
                object.__setattr__(self, f.name, str(value))
