"""A helper the counter's code imports in the sandbox child: it binds the clock when it is imported
(``from time import time``), before the fork — the name the frozen clock rebinds because the adapter declares
this package in ``modules``."""

from __future__ import annotations

from time import time as _now


def stamp() -> float:
    """The time of a call, as the environment records it."""
    return round(_now(), 3)
