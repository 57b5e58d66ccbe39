"""Settings dataclass fields that carry their description: the domain's settings dataclasses are the one list of a
stage's knobs, and its Dagster config / resource is derived from them (``resources/config_from.py``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

#: key of a field's description in ``dataclasses.Field.metadata``
DESCRIPTION = "description"


def setting(
    default: Any = dataclasses.MISSING, description: str = "", *, factory: Callable[[], Any] | Any = dataclasses.MISSING
) -> Any:
    """A dataclass field with a default (or ``factory``; neither: required) and the derived config's description."""
    return dataclasses.field(default=default, default_factory=factory, metadata={DESCRIPTION: description})


def same_as(cls: type, name: str) -> Any:
    """Field ``name`` of dataclass ``cls`` again (its default and description), for a settings class
    that passes the value on to ``cls``: one default, written once."""
    source = {f.name: f for f in dataclasses.fields(cls)}[name]
    return dataclasses.field(default=source.default, default_factory=source.default_factory, metadata=source.metadata)


def description(f: dataclasses.Field) -> str | None:
    return f.metadata.get(DESCRIPTION) or None
