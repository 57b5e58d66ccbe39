"""What every command shares: :class:`Command` and the :data:`COMMANDS` registry (:func:`command` registers a
function), the usage, the data root resolved once (:func:`data_root`), its run history (:func:`dagster_home`), the
environment of a process a command starts (:func:`child_env`), the settings' checks, and how a command says a line,
starts a process or becomes one. Only the standard library (and ``pipeline.core``'s standard-library modules) is
imported at the top: ``COMMAND -h`` works without ``.venv``."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pipeline.core.registry import Registry

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Command:
    """A command of ``./forge``: ``run`` takes its arguments and returns the exit status (None for the set-up
    commands ``./forge`` runs itself); ``usage`` is its part of ``./forge --help`` after its name (the synopsis and
    what it does; more lines indented)."""

    name: str
    run: Callable[[list[str]], int] | None
    usage: str


#: every command, in the usage's order (cli/commands/__init__.py imports their modules in it); installed plugins'
#: commands after them (docs/extending.md)
COMMANDS: Registry[Command] = Registry("command", "envsim_forge.commands", check=lambda c: isinstance(c, Command))


def command(usage: str) -> Callable[[Callable[[list[str]], int]], Callable[[list[str]], int]]:
    """Register the decorated function as a command named after it (``_`` as ``-``), with its ``usage``."""

    def register(run: Callable[[list[str]], int]) -> Callable[[list[str]], int]:
        COMMANDS.register(Command(run.__name__.replace("_", "-"), run, usage))
        return run

    return register


def usage() -> str:
    """``./forge --help``: every command of :data:`COMMANDS` with its usage."""
    lines = [f"  {c.name} {c.usage}" for c in COMMANDS.values()]
    return (
        "usage: ./forge COMMAND [OPTIONS]   (./forge COMMAND -h: that command's options)\n\n" + "\n".join(lines) + "\n"
    )


def say(line: str, file=None) -> None:
    print(line, file=file or sys.stdout, flush=True)


def say_problems(lines: list[str], prefix: str = "") -> bool:
    """Say each problem on stderr, one line each; whether there was any."""
    for line in lines:
        say(prefix + line, file=sys.stderr)
    return bool(lines)


def data_root(given: str | Path | None = None) -> Path:
    """The data root, absolute: ``given`` (a ``--data-root``), else the settings' (``ENVSIM_DATA_ROOT``, default
    ``./data``; ``./forge`` runs from the repository root, so ``<repo>/data``). The one place it is resolved."""
    from pipeline.core.settings import settings

    return Path(given or settings().data_root).expanduser().resolve()


def dagster_home(root: Path, make: bool = True) -> Path:
    """The run history of the data root ``root``: ``DAGSTER_HOME`` when the user set one, else
    ``<root>/.dagster_home``; with ``make``, created with the project's ``dagster.yaml``. The UI, its plots, the
    sensors and ``./forge run``'s timings all read this one home."""
    home = Path(os.environ.get("DAGSTER_HOME") or root / ".dagster_home")
    if not make:
        return home
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if not config.is_file():
        config.write_text((ROOT / "dagster.yaml").read_text())
    return home


def child_env() -> dict[str, str]:
    """The environment of a process a command starts (the UI, pytest, the benchmarks): this one's, with the data
    root absolute and its run history (made), so that every process it starts shares them."""
    root = data_root()
    return {**os.environ, "ENVSIM_DATA_ROOT": str(root), "DAGSTER_HOME": str(dagster_home(root))}


def call(argv: list[str], env: dict[str, str] | None = None) -> int:
    """Run ``argv`` and wait for it (its exit status)."""
    sys.stdout.flush()
    sys.stderr.flush()
    return subprocess.run(argv, env=env).returncode


def become(argv: list[str], env: dict[str, str]) -> int:
    """Replace this process by ``argv`` (its exit status is the command's)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(argv[0], argv, env)
    return 127  # not reached


def wants_help(argv: list[str]) -> bool:
    return "-h" in argv or "--help" in argv


def settings_problems() -> list[str]:
    """What is wrong with the ``ENVSIM_*`` variables, one line each naming the variable and the fix, then with the
    data root they name (a file, not writable, no space left: :func:`pipeline.store.layout.root_problems`)
    (``./forge run`` and ``./forge ui`` check this before they start anything)."""
    from pipeline.core.settings import SettingsError, settings, unknown_variables  # choices: Literals of Settings
    from pipeline.store.layout import root_problems

    unknown = unknown_variables()
    try:
        settings()
    except SettingsError as exc:
        return [*unknown, f"{exc}: fix the value or unset the variable"]
    return unknown + root_problems(data_root())


def launch_settings():  # -> Settings (pydantic is not imported at the top: COMMAND -h works without .venv)
    """The settings of a job ``./forge`` runs in this process: the process's, with the data root resolved and the
    in-process executor unless ``ENVSIM_EXECUTOR`` chooses another (the UI and the daemon keep Dagster's multiprocess
    executor; docs/scale-out.md). Dagster validates the run config against the job with the executor it will have."""
    from pipeline.core.settings import settings

    current = settings()
    executor = {} if "executor" in current.model_fields_set else {"executor": "in_process"}
    return current.model_copy(update={"data_root": data_root(), **executor})


def repair_data_index(root: Path, name: str) -> None:
    """The data root's ``envsim.duckdb`` made again from the Parquet tables when it is empty, invalid or missing
    (:func:`pipeline.store.duck.repair_index`), saying so in one line."""
    from pipeline.store.duck import repair_index
    from pipeline.store.layout import DataLayout

    line = repair_index(DataLayout.at(root))
    if line:
        say(f"./forge {name}: {line}", file=sys.stderr)
