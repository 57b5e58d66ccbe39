"""A source's profile-dependent defaults (bfcl categories, builtin scenarios per environment): each
source keeps a table by run profile, read here by ``ENVSIM_PROFILE``. Read from the settings, not
from :mod:`pipeline.core.profile`, which the sandbox worker must not import (its numpy starts threads)."""

from __future__ import annotations

from typing import Mapping, TypeVar

from pipeline.core.settings import settings

T = TypeVar("T")


def of_profile(table: Mapping[str, T]) -> T:
    """``table``'s entry for the run profile in force, or a ValueError naming the known profiles."""
    name = settings().profile
    if name not in table:
        raise ValueError(f"unknown ENVSIM_PROFILE {name!r}; known: {sorted(table)}")
    return table[name]
