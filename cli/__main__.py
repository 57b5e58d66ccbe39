"""``python -m cli COMMAND ARGS`` (what ``./forge`` runs): :func:`cli.entry.main` with SIGINT, SIGTERM and SIGHUP
interrupting the command, and whatever it started and did not stop ended with it."""

import os
import sys

from cli.entry import interrupt_on_signals, main
from pipeline.core.processes import end_descendants

if __name__ == "__main__":
    interrupt_on_signals()
    try:
        sys.exit(main())
    except BrokenPipeError:  # the reader went away (./forge --help | head): no traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
    finally:
        end_descendants()  # any process the command started and did not stop goes with it
