"""Every command of ``./forge``, one module each or per group of related commands, imported here in the usage's
order (each registers its commands in :data:`cli.base.COMMANDS` as it is imported; ``./forge --help`` lists them
so): the standard library only at the top of each, so ``COMMAND -h`` works without ``.venv``."""

# the usage's order, not the alphabet's: the modules are imported (their commands registered) in this order
# isort: off
from cli.commands import (  # noqa: F401
    run,
    regenerate,
    report,
    test,
    ui,
    bench,
    serve_env,
    bench_scale,
    bench_model,
    download,
    summary,
    sql,
    check_settings,
    partitions,
    set_up,
)

# isort: on
