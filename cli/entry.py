"""``./forge COMMAND [ARGS]`` in Python (:func:`main`, which ``python -m cli`` runs): the command found in
:data:`cli.base.COMMANDS` (every module of cli/commands/ imported, so registered in the usage's order), the process
prepared once (``prepare_process()``: before any command imports pyarrow), the command run and its exit status
returned; :func:`interrupt_on_signals`, the ``./forge`` process's set-up."""

from __future__ import annotations

import importlib.util
import signal
import sys

from cli import commands  # noqa: F401  (registers every command, in the usage's order)
from cli.base import COMMANDS, say, usage, wants_help
from cli.commands.run import run_parser


def _not_set_up(name: str, argv: list[str]) -> int:
    """A command whose tool is not installed here: its help is the usage and how to set up; else one line, exit 2."""
    if wants_help(argv):
        say(f"{usage()}\n(./forge setup first, then ./forge {name} -h lists every option of {name})")
        return 0
    say(
        f"./forge {name}: the project's environment is not set up here: run ./forge setup (or ./forge {name})",
        file=sys.stderr,
    )
    return 2


def main(argv: list[str] | None = None) -> int:
    """``./forge COMMAND [ARGS]`` (no command: ``run``); ``-h``/``--help``/``help``: the usage."""
    argv = list(sys.argv[1:] if argv is None else argv)
    name, args = (argv[0], argv[1:]) if argv else ("run", [])
    if name in ("-h", "--help", "help"):
        say(usage())
        return 0
    found = COMMANDS.find(name)
    if found is None:
        say(f"./forge: unknown command '{name}': run ./forge --help for the commands", file=sys.stderr)
        return 2
    if found.run is None:  # ./forge's own set-up commands
        if wants_help(args):
            say(usage())
            return 0
        say(f"./forge {name} builds an environment: run it as ./forge {name}", file=sys.stderr)
        return 2
    if importlib.util.find_spec("dagster") is None:  # the machine's python3 (a tree without .venv): installs nothing
        if name == "run" and wants_help(args):
            run_parser().parse_args(args)  # its parser is the standard library's: prints the help, exits 0
        return _not_set_up(name, args)
    from pipeline.core.settings import SettingsError, prepare_process

    prepare_process()  # first, before anything imports pyarrow
    try:
        return found.run(args)
    except SettingsError as exc:  # an ENVSIM_* variable no command can use (./forge run names them all first)
        say(f"./forge {name}: {exc}: fix the value or unset the variable", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # SIGINT, SIGTERM or SIGHUP: the command's finally blocks ran (its servers stopped)
        say(f"./forge {name}: interrupted", file=sys.stderr)
        return 130


_interrupted: list[str] = []  # the signal that interrupted the command (only the first one interrupts)


def _raise_interrupt(signum: int, _frame: object) -> None:
    """Interrupt the command once: a second signal while its ``finally`` blocks stop what it started (``timeout``
    signals the command and then its whole process group; a user presses Ctrl-C twice) is let pass, so the
    clean-up (bounded by :func:`pipeline.core.processes.end_descendants`'s grace) completes and the one-line message
    stands."""
    if _interrupted:
        return
    _interrupted.append(signal.Signals(signum).name)
    raise KeyboardInterrupt(_interrupted[0])


def interrupt_on_signals() -> None:
    """The ``./forge`` process's set-up: SIGINT, SIGTERM and SIGHUP (``timeout``, a closed terminal, ``kill``) all
    interrupt a command as Ctrl-C does, also when it was started with SIGINT ignored (in the background of a
    script), so its ``finally`` blocks run: a model server it started is stopped. (``./forge run`` and ``./forge ui``
    supervise their own processes.)"""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _raise_interrupt)
