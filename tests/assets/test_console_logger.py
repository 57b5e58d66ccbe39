"""Text from inside an environment never reaches the terminal raw: every job of the code location logs through the
escaping console logger (assets/loggers.py), so a reset error carrying ESC ]0; (window title), ESC [2J (clear screen)
and a forged "all checks passed" line is shown escaped, on the line of the message that carried it."""

from __future__ import annotations

import dagster as dg

from assets.loggers import LOGGERS
from cli.launch import console_logger_config
from pipeline.core.untrusted import log_line

HOSTILE = "reset failed: \x1b]0;pwned\x07\x1b[2J\x1b[8mhidden\x1b[0m\r\nenvsim_main: all checks passed"


@dg.asset
def _speaks(context) -> None:
    context.log.warning(f"skipped task t1 (reset): {HOSTILE}")


def test_a_hostile_reset_error_is_logged_escaped(capfd):
    job = dg.define_asset_job("speak", selection=[_speaks])
    defs = dg.Definitions(assets=[_speaks], jobs=[job], loggers=LOGGERS)
    run_config = console_logger_config(None)  # what ./forge run starts every job with (cli/launch.py)
    assert defs.resolve_job_def("speak").execute_in_process(run_config=run_config).success
    err = capfd.readouterr().err
    assert "\x1b]0;" not in err and "\x1b[2J" not in err and "\r" not in err, err
    assert "\\x1b]0;pwned" in err
    forged = [line for line in err.splitlines() if "all checks passed" in line]
    assert forged and all(line.startswith("    ") for line in forged), forged


def test_log_line_keeps_lines_but_starts_none():
    assert log_line("a\nb\x1b[2J") == "a\n    b\\x1b[2J"


def test_every_job_of_the_code_location_logs_escaped():
    from assets.definitions import build_definitions
    from pipeline.core.settings import Settings

    defs = build_definitions(Settings())
    for job in defs.resolve_all_job_defs():
        assert job.loggers.get("console") is LOGGERS["console"], job.name
