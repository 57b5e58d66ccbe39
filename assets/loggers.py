"""The console logger of every job: Dagster's colored console logger whose messages pass through
:func:`pipeline.core.untrusted.log_line` first, so text from inside an environment (a reset error, a tool's output,
a quarantine reason) is shown with its control characters escaped and can start no line of its own; the data keeps
it verbatim."""

from __future__ import annotations

import logging

import dagster as dg
from dagster._core.utils import coerce_valid_log_level
from dagster._loggers import colored_console_logger
from dagster._utils.log import create_console_logger

from pipeline.core.untrusted import log_line


class _Escaped(logging.Filter):
    """Rewrites a record's message to :func:`log_line` of it (formatted once: its arguments are applied)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = log_line(record.getMessage()), None
        return True


@dg.logger(colored_console_logger.config_schema, description="The colored console logger, control characters escaped.")
def escaped_console_logger(init_context: dg.InitLoggerContext) -> logging.Logger:
    """Dagster's ``console`` logger with :class:`_Escaped` on it."""
    config = init_context.logger_config
    logger = create_console_logger(name=config["name"], level=coerce_valid_log_level(config["log_level"]))
    logger.addFilter(_Escaped())
    return logger


LOGGERS = {"console": escaped_console_logger}
