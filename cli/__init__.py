"""The one CLI: ``./forge COMMAND ARGS`` sets up ``.venv/`` and runs ``python -m cli COMMAND ARGS`` (cli/__main__.py,
:func:`cli.entry.main`). Each command is one function (``argv`` in, the exit status out) in a module of
cli/commands/ and one entry of :data:`cli.base.COMMANDS`, a registry that installed plugin packages add to by entry
point (``envsim_forge.commands``, docs/extending.md); ``setup``, ``train-env``, ``serve-venv`` and ``openenv-env``
are ``./forge``'s own (only their help is here, cli/commands/set_up.py). The settings are read here and passed on as
values (the data root resolved once, :func:`cli.base.data_root`); a process a command starts gets them in its
environment (:func:`cli.base.child_env`); this process's environment is only read. Only the standard library is
imported at the top of cli/base.py, cli/entry.py and cli/commands/, so ``COMMAND -h`` works without ``.venv`` (with
the machine's python3); :mod:`cli.launch` (``./forge run``'s launch) and :mod:`cli.summary` (what it prints after)
are imported by the commands that use them, after :func:`cli.entry.main` has prepared the process. Nothing of
``pipeline``, ``assets`` or ``resources`` imports ``cli`` (an import-linter contract)."""
