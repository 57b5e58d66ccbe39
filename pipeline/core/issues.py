"""Input that could not be used: a task, a line, an environment — with the stage that rejected it and why."""

from __future__ import annotations

from dataclasses import dataclass


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
        for name in ("task_id", "stage", "reason", "origin", "trajectory_id"):
            value = getattr(self, name)
            if value is None:
                continue
            if not isinstance(value, str):
                object.__setattr__(self, name, str(value))
            elif any("\ud800" <= ch <= "\udfff" for ch in value):
                object.__setattr__(self, name, value.encode("utf-8", "backslashreplace").decode("utf-8"))
