"""A source's profile-dependent defaults (bfcl categories, builtin scenarios per environment): each
source keeps a table by run profile name, and the name of the profile in force is passed down to it
(``resources.sets`` -> the ``sources`` resource); nothing here reads the environment. Apart from
:mod:`pipeline.core.profile`, which the sandbox worker must not import (its numpy starts threads)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

T = TypeVar("T")

#: the profile whose entries are the defaults of the domain dataclasses (``pipeline.core.profile.DEFAULT``)
DEFAULT = "default"


def of_profile(table: Mapping[str, T], name: str = DEFAULT) -> T:
    """``table``'s entry for the profile ``name``, or a ValueError naming the known profiles."""
    if name not in table:
        raise ValueError(f"unknown ENVSIM_PROFILE {name!r}; known: {sorted(table)}")
    return table[name]
