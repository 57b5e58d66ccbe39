"""``./forge test``: the test suite (pytest)."""

from __future__ import annotations

import os
import sys

from cli.base import become, child_env, command, wants_help


@command("[PYTEST ARGS]   set up, run the test suite (e.g. ./forge test -m 'not slow' -x)")
def test(argv: list[str]) -> int:
    """``./forge test [PYTEST ARGS]``: pytest with the arguments as given (pyproject's addopts apply)."""
    return become([sys.executable, "-m", "pytest", *argv], dict(os.environ) if wants_help(argv) else child_env())
