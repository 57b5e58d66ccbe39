"""``./forge report`` and ``./forge timings``: what the latest run did, from the data root's run history."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cli.base import command, dagster_home, data_root, say


def _report_parser(name: str, what: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"./forge {name}", description=what)
    parser.add_argument("--job")  # default: the main job (assets.jobs is imported only to run: -h needs no Dagster)
    parser.add_argument("--since", type=float, help="only a run created after this time (epoch seconds)")
    parser.add_argument("--data-root", help="the data root whose runs count (default: ENVSIM_DATA_ROOT or ./data)")
    return parser


def _run_history(name: str, root: Path) -> Path | None:
    """The run history ``./forge run`` keeps for the data root ``root`` (:func:`dagster_home`), or None after one
    line when there is none."""
    home = dagster_home(root, make=False)
    if home.is_dir():
        return home
    say(
        f"./forge {name}: no run history at {home}: ./forge run has not run on this data root (or set DAGSTER_HOME)",
        file=sys.stderr,
    )
    return None


@command("[--since EPOCH] [--data-root DIR] [--status N]   what the latest run did: timings, failed steps or summary")
def report(argv: list[str]) -> int:
    """``./forge report``: what the latest run did (what ``./forge run`` prints after its run)."""
    parser = _report_parser(
        "report",
        "What the latest run did: its time per step, then its failed steps with their "
        "one-line causes, or the summary of the data with what the run changed.",
    )
    parser.add_argument("--status", type=int, default=0, help="the launcher's exit status")
    args = parser.parse_args(argv)
    root = data_root(args.data_root)
    home = _run_history("report", root)
    if home is None:
        return args.status or 1
    from assets.jobs import MAIN_JOB
    from cli import launch
    from pipeline.core.settings import settings

    job = MAIN_JOB if args.job is None else args.job
    return launch.report(home, root, job, since=args.since, status=args.status, current=settings())


@command("[--since EPOCH] [--data-root DIR]   the latest run's time per step")
def timings(argv: list[str]) -> int:
    """``./forge timings``: the latest run's time per step (exit 3: no such run)."""
    args = _report_parser("timings", "The latest run's time per step and outside the steps.").parse_args(argv)
    root = data_root(args.data_root)
    home = _run_history("timings", root)
    if home is None:
        return 3
    from assets.jobs import MAIN_JOB
    from cli import launch

    job = MAIN_JOB if args.job is None else args.job
    return 0 if launch.print_run_timings(home, root, job, since=args.since) else 3
