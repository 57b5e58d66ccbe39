"""On ``PYTHONPATH`` of a test's ``dg dev`` (tests/support/ui_server.py, ``DagsterServer(quick_backfills=True)``): in
the Dagster daemon's process only, the backfill daemon looks at its backfills every :data:`TICK_S` seconds instead
of Dagster's fixed 30 s, which no dagster.yaml setting changes. A test then waits for the backfill's work, not up to
30 s before the daemon requests the runs and again up to 30 s before it calls the backfill complete. Every other
process of the server (webserver, code server, runs, steps) finds this file and does nothing."""

import sys

TICK_S = 5  # an iteration takes a second or two of the daemon's CPU: shorter ticks would take it from the runs

if "dagster._daemon" in getattr(sys, "orig_argv", ()):
    import dagster._daemon.controller as controller

    # read when the backfill daemon's loop starts (and the AssetDaemon's default interval: this project defines no
    # automation conditions)
    assert controller.DEFAULT_DAEMON_INTERVAL_SECONDS == 30, "Dagster changed its daemon interval: revisit this file"
    controller.DEFAULT_DAEMON_INTERVAL_SECONDS = TICK_S
