"""``./forge``'s own set-up commands (``train-env``, ``serve-venv``, ``openenv-env``, ``setup``): the bash script
runs them; only their help is here."""

from __future__ import annotations

from cli.base import COMMANDS, Command

for _name, _usage in (
    ("train-env", "    create .venv-train/ (LLaMA-Factory, torch) for training and serving jobs"),
    ("serve-venv", "   GPU nodes: create .venv-serve/ (vLLM)"),
    ("openenv-env", "  create .venv-openenv/ (OpenEnv's own client, beside .venv's packages)"),
    ("setup", "        only set up .venv/"),
):
    COMMANDS.register(Command(_name, None, _usage))
