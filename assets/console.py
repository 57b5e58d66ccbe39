"""The console logger of the jobs ``./forge`` runs (its launch names it in the run config): Dagster's colored console
logger, whose failure events stop before their stack trace (``./forge run`` then names the failed step and its
one-line cause). The stack stays in the run's event log (the UI shows it), and a run config
``loggers: {console: {config: {log_level: DEBUG}}}`` prints it again."""

import logging

import dagster as dg

#: where Dagster's failure events (STEP_FAILURE, RUN_FAILURE) start their stack trace
STACK = "\nStack Trace:"


#: the step the latest console line of this process came from (a run whose own history cannot be read any more, on a
#: full disk, is still said to have failed at it)
_LAST_STEP: list[str] = []


def last_step() -> str | None:
    """The step the latest console line of a run in this process named (None before any)."""
    return _LAST_STEP[-1] if _LAST_STEP else None


def _without_stack(record: logging.LogRecord) -> bool:
    """Cut a failure event's message before its stack trace (the record is kept); note the step it names."""
    step = (getattr(record, "dagster_meta", None) or {}).get("step_key")
    if step:
        _LAST_STEP[:] = [step]
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
