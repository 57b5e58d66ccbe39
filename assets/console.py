"""The console logger of the jobs ``./forge`` runs (its launch names it in the run config): Dagster's colored console
logger, whose failure events stop before their stack trace (``./forge run`` then names the failed step and its
one-line cause). The stack stays in the run's event log (the UI shows it), and a run config
``loggers: {console: {config: {log_level: DEBUG}}}`` prints it again."""

import logging

import dagster as dg

#: where Dagster's failure events (STEP_FAILURE, RUN_FAILURE) start their stack trace
STACK = "\nStack Trace:"


def _without_stack(record: logging.LogRecord) -> bool:
    """Cut a failure event's message before its stack trace (the record is kept)."""
    message = record.getMessage()
    if STACK in message:
        record.msg, record.args = message.split(STACK, 1)[0].rstrip(), ()
    return True


@dg.logger(
    config_schema=dg.colored_console_logger.config_schema,
    description="Dagster's colored console logger; at INFO and above a failure is logged without its stack trace.",
)
def console(init_context: dg.InitLoggerContext) -> logging.Logger:
    log = dg.colored_console_logger.logger_fn(init_context)
    if log.level > logging.DEBUG:
        for handler in log.handlers:
            handler.addFilter(_without_stack)
    return log
