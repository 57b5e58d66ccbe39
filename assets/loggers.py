"""The console logger of every job: Dagster's colored console logger, each message cut before a failure's stack
trace at INFO and above (``./forge run`` then names the failed step and its cause; the run's event log keeps the stack,
``log_level: DEBUG`` prints it) and passed through :func:`pipeline.core.untrusted.log_line`, so text from inside an
environment is shown with its control characters escaped and starts no line of its own (the data keeps it verbatim)."""

from __future__ import annotations

import logging

import dagster as dg
from dagster._core.utils import coerce_valid_log_level
from dagster._utils.log import create_console_logger

from pipeline.core.untrusted import log_line

#: where Dagster's failure events (STEP_FAILURE, RUN_FAILURE) start their stack trace
STACK = "\nStack Trace:"

#: the step the latest console line of this process came from (a run whose own history cannot be read any more, on a
#: full disk, is still said to have failed at it)
_LAST_STEP: list[str] = []


def last_step() -> str | None:
    """The step the latest console line of a run in this process named (None before any)."""
    return _LAST_STEP[-1] if _LAST_STEP else None


class _ConsoleLine(logging.Filter):
    """Notes the record's step, cuts a failure's stack trace (unless ``keep_stack``), then escapes the message."""

    def __init__(self, keep_stack: bool) -> None:
        super().__init__()
        self.keep_stack = keep_stack

    def filter(self, record: logging.LogRecord) -> bool:
        step = (getattr(record, "dagster_meta", None) or {}).get("step_key")
        if step:
            _LAST_STEP[:] = [step]
        message = record.getMessage()
        if not self.keep_stack and STACK in message:
            message = message.split(STACK, 1)[0].rstrip()
        record.msg, record.args = log_line(message), None
        return True


@dg.logger(
    dg.colored_console_logger.config_schema,
    description="Dagster's colored console logger: control characters escaped; at INFO and above a failure is "
    "logged without its stack trace.",
)
def console(init_context: dg.InitLoggerContext) -> logging.Logger:
    """Dagster's ``console`` logger with :class:`_ConsoleLine` on it."""
    config = init_context.logger_config
    level = coerce_valid_log_level(config["log_level"])
    logger = create_console_logger(name=config["name"], level=level)
    logger.addFilter(_ConsoleLine(keep_stack=level <= logging.DEBUG))
    return logger


LOGGERS = {"console": console}
