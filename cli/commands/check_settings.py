"""``./forge check-settings``: the ``ENVSIM_*`` variables checked."""

from __future__ import annotations

import argparse

from cli.base import command, data_root, say, say_problems, settings_problems


@command("  check the ENVSIM_* variables (what ./forge run checks first)")
def check_settings(argv: list[str]) -> int:
    """``./forge check-settings``: one line per problem (exit 2), or one line saying which variables are set."""
    argparse.ArgumentParser(prog="./forge check-settings", description="check the ENVSIM_* variables").parse_args(argv)
    if say_problems(settings_problems()):
        return 2
    from pipeline.core.settings import settings, variable

    current = settings()
    given = sorted(variable(name) for name in current.model_fields_set)
    which = f"{', '.join(given)} set, the others at their defaults" if given else "every variable at its default"
    say(
        f"settings OK: {which} (docs/settings.md); profile {current.profile}, data root "
        f"{data_root()}, split schedule '{current.split_cron}' (UTC)"
    )
    return 0
