"""``./forge regenerate``: ``weekly_splits``' job now, on the data root's run history."""

from __future__ import annotations

import argparse

from cli.base import command, dagster_home, launch_settings, repair_data_index, say_problems, settings_problems


@command(
    """[--seed N]   run weekly_splits' job (regenerate_splits) now, on the data root's run history (the UI's)
                --seed N   the seed of both splits (default: this ISO week's, 202648 in week 48 of 2026, as the
                           schedule draws it)"""
)
def regenerate(argv: list[str]) -> int:
    """``./forge regenerate``: the job of the schedule ``weekly_splits`` (re-stratify, new benchmark and mixture
    versions, their exports and evaluation) run now in this process on the data root's Dagster home, so the run is
    in the UI's history; then its report (:func:`cli.launch.report`). The exit status is the run's."""
    parser = argparse.ArgumentParser(
        prog="./forge regenerate",
        description="Run the job of the schedule weekly_splits (regenerate_splits) now, on the data root's run "
        "history (the one ./forge ui shows), and print what it changed.",
    )
    parser.add_argument("--seed", type=int, metavar="N", help="the seed of both splits (default: this ISO week's)")
    args = parser.parse_args(argv)
    if say_problems(settings_problems()):
        return 2
    from datetime import UTC, datetime

    from assets.automation import week_seed
    from cli import launch

    current = launch_settings()
    seed = week_seed(datetime.now(UTC)) if args.seed is None else args.seed
    repair_data_index(current.data_root, "regenerate")
    return launch.regenerate(current, dagster_home(current.data_root), seed)
