"""The tree is formatted and linted by ruff, as configured in pyproject.toml ([tool.ruff]): `ruff format --check`
and `ruff check` pass, so CI (which runs this suite) fails on an unformatted file or a lint finding. The fix is one
command: `.venv/bin/ruff format . && .venv/bin/ruff check --fix .`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("command", [["format", "--check"], ["check"]], ids=["format", "lint"])
def test_ruff_passes_on_the_tree(command):
    done = subprocess.run(
        [sys.executable, "-m", "ruff", *command, "--no-cache", "."], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, f"ruff {' '.join(command)} failed; run `ruff format . && ruff check --fix .`:\n" + (
        done.stdout[-4000:] + done.stderr[-2000:]
    )


def test_the_configuration_is_the_one_in_pyproject():
    """The line length and rule set the docs quote are pyproject's, and the files ruff must not touch (data that
    is part of the outputs) are excluded there."""
    text = (ROOT / "pyproject.toml").read_text()
    assert "[tool.ruff]" in text and "line-length = 120" in text
    assert '"pipeline/envs/builtin/code"' in text  # the builtin pack's code is sample data (code(a_t))
