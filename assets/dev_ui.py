"""The process ``./forge ui`` starts (``python -m assets.dev_ui ARGS``): ``dg dev ARGS``, without Dagster's warning
that the ``dagster.yaml`` in the current folder "will not be used". ``./forge`` runs from the repository root, whose
``dagster.yaml`` is the project's instance configuration that ``./forge`` copies into ``$DAGSTER_HOME``
(``cli/base.py`` ``dagster_home``): the home holds it, so the warning would send the user looking for a
problem there is not. Everything else ``dg dev`` logs is shown as it is."""

from __future__ import annotations

import logging
import sys

#: the text of the warning left out (dagster/_cli/dev.py, when DAGSTER_HOME is not the current folder)
NOT_USED = "file will not be used to configure Dagster"


def main(argv: list[str] | None = None) -> int:
    """``dg dev`` with ``argv`` (default: this process's arguments); returns its exit status."""
    # kept when dg dev configures its loggers
    logging.getLogger("dagster").addFilter(lambda record: NOT_USED not in record.getMessage())
    from dagster_dg_cli.cli import main as dg

    sys.argv = ["dg", "dev", *(sys.argv[1:] if argv is None else argv)]
    try:
        dg()
    except SystemExit as exit_:  # click ends with SystemExit: its code is the status
        return exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
