"""``./forge run``: the settings and the run config checked, then the main job launched in this process
(:mod:`cli.launch`) and reported on."""

from __future__ import annotations

import argparse
import warnings
from typing import NoReturn

from cli.base import command, dagster_home, launch_settings, repair_data_index, say_problems, settings_problems

#: ``./forge run``'s options, as its one-line errors name them
RUN_OPTIONS = "-c/--config FILE (repeatable), --config-json JSON, --seed N"


class _RunParser(argparse.ArgumentParser):
    """``./forge run``'s parser: a usage error (an unknown option, a value that does not parse) is one line naming
    the problem and ``./forge run``'s options, exit 2 (argparse's default is the usage and then the error)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"./forge run: {message}: it takes {RUN_OPTIONS} (./forge run -h)\n")


def run_parser() -> argparse.ArgumentParser:
    """The options of ``./forge run`` (its ``-h`` prints these only; ``./forge --help`` lists every command)."""
    parser = _RunParser(
        prog="./forge run",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run the main job (envsim_main) on the embedded default and print where the data went. Before "
        "anything starts, the ENVSIM_* variables and the run config are checked (Dagster validates the run "
        "config against the job): one line per problem naming the key and the fix, exit 2.",
        epilog="environment: ENVSIM_DATA_ROOT (default ./data), ENVSIM_PROFILE (default, small or a .toml path),\n"
        "ENVSIM_SHARDS, ENVSIM_SANDBOX_WORKERS, ... (docs/settings.md). ./forge --help lists every command.",
    )
    parser.add_argument(
        "-c",
        "--config",
        action="append",
        default=[],
        metavar="FILE",
        help="a run config YAML (repeatable; files listed first win)",
    )
    parser.add_argument("--config-json", metavar="JSON", help="a run config as a JSON string (it wins over the files)")
    parser.add_argument(
        "--seed",
        type=int,
        metavar="N",
        help="the seed of the benchmark and the SFT mixture (ops.benchmark_split.config.seed and "
        "ops.sft_mixture.config.seed; it wins over the config). Without it each keeps the seed of its CURRENT "
        "version (0 when there is none)",
    )
    return parser


@command(
    """[-c FILE]... [--config-json JSON] [--seed N]
                set up, run the main job (envsim_main) on the embedded default, print where the data went
                -c/--config FILE   a run config YAML (repeatable; files listed first win), e.g. ops: benchmark_split:
                                   config: on_shortfall: fail (README "Bring your own corpus, tasks or model endpoint")
                --config-json JSON the same as a JSON string (it wins over the files)
                --seed N           the seed of the benchmark and the SFT mixture (default: their CURRENT versions')
                environment: ENVSIM_DATA_ROOT (default ./data), ENVSIM_PROFILE (default, small or a .toml path),
                ENVSIM_SHARDS, ENVSIM_SANDBOX_WORKERS, ... (docs/settings.md)"""
)
def run(argv: list[str]) -> int:
    """``./forge run``: the settings checked, then the run config checked by Dagster against the job of the
    definitions built once from them, then that job run with that config in this process (``cli/launch.py``) and
    reported on. The exit status is the run's (or the summary's)."""
    args = run_parser().parse_args(argv)  # an unknown option or argument: one line naming ./forge run's options
    if say_problems(settings_problems()):
        return 2
    current = launch_settings()
    with warnings.catch_warnings():  # the checks print only their lines (the run shows Dagster's warnings)
        warnings.simplefilter("ignore")
        from assets.jobs import MAIN_JOB
        from cli import launch

        run_config, problems = launch.load_run_config(args.config, args.config_json, seed=args.seed)
        if not problems:
            given = args.config + ["--config-json"] * bool(args.config_json) + ["--seed"] * (args.seed is not None)
            problems = launch.check_launch(MAIN_JOB, run_config, current, where=" and ".join(given) or "run config")
    if say_problems(problems, "./forge run: "):
        return 2  # nothing written: no data root, no run history
    repair_data_index(current.data_root, "run")
    home = dagster_home(current.data_root)
    try:
        return launch.launch(current, home, run_config)
    except Exception as exc:  # a full disk under Dagster's own run history: one line, no traceback
        code = launch.failed_on_full_disk(exc, home, current.data_root)
        if code is None:
            raise
        return code
