"""The one CLI: ``./forge COMMAND`` sets up ``.venv/`` and then runs ``python -m assets.cli COMMAND`` with every
argument, so each command below is parsed and run here. The Dagster commands (``run``, ``ui``, ``report``,
``timings``) are this module's, the tools it starts (``test``: pytest, ``bench``, ``bench-scale``) pass their
arguments through, and the commands that need no Dagster (``download``, ``bench-model``, ``summary``,
``partitions``, ``check-settings``) are ``pipeline/__main__.py``'s, handed to it as they are. ``setup``,
``train-env`` and ``serve-env`` build environments: they are ``./forge``'s own (only their help is here).

This module imports only the standard library at its top, so ``COMMAND -h`` prints help in a tree without
``.venv`` too (``./forge`` then runs it with the machine's python3); everything else is imported by the command
that needs it.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent  # the environment's scripts: dg

USAGE = """\
usage: ./forge COMMAND [OPTIONS]   (./forge COMMAND -h: that command's options)

  run [-c FILE]... [--config-json JSON] [--seed N]
                set up, run the main job (envsim_main) on the embedded default, print where the data went
                -c/--config FILE   a run config YAML (repeatable; files listed first win), e.g. ops: benchmark_split:
                                   config: on_shortfall: fail (README "Bring your own corpus, tasks or model endpoint")
                --config-json JSON the same as a JSON string (it wins over the files)
                --seed N           the seed of the benchmark and the SFT mixture (default: their CURRENT versions')
                environment: ENVSIM_DATA_ROOT (default ./data), ENVSIM_PROFILE (default|small), ENVSIM_SHARDS,
                ENVSIM_SANDBOX_WORKERS, ... (docs/settings.md)
  test [PYTEST ARGS]   set up, run the test suite (e.g. ./forge test -m 'not slow' -x)
  ui            set up, start the Dagster UI (dg dev) on http://127.0.0.1:3000
  bench         set up, run the benchmarks (sandbox labeling throughput, evaluation harness)
  bench-scale [--steps N ...] [--naive]   stratify -> select -> export on synthetic corpora (functions, assets)
  bench-model [--checkpoint REF] [--per-cell N] [--max-tokens N] ...   score a served model on the benchmark
  download envscaler [--endpoint URL] [--data-root DIR] ...   fetch the EnvScaler corpus into the data root
  summary [DATA_ROOT]   print where the data is and what it holds (what ./forge run prints last)
  sql [QUERY] [--data-root DIR]   run SQL on the data root's envsim.duckdb and print the table; no QUERY: a prompt
  report [--since EPOCH] [--data-root DIR] [--status N]   what the latest run did: timings, failed steps or summary
  timings [--since EPOCH] [--data-root DIR]   the latest run's time per step
  check-settings   check the ENVSIM_* variables (what ./forge run checks first)
  partitions    print the partition keys ENVSIM_SHARDS gives
  train-env     create .venv-train/ (LLaMA-Factory, torch) for training and serving jobs
  serve-env     GPU nodes: create .venv-serve/ (vLLM)
  setup         only set up .venv/
"""

#: the main job ``./forge run`` launches
MAIN_JOB = "envsim_main"


@dataclass(frozen=True)
class Command:
    """A command of ``./forge``: ``run`` takes its arguments and returns the exit status; None for the set-up
    commands ``./forge`` runs itself."""

    name: str
    run: Callable[[list[str]], int] | None


def _say(line: str, file=None) -> None:
    print(line, file=file or sys.stdout, flush=True)


def _set_up_note(name: str) -> str:
    return f"(./forge setup first, then ./forge {name} -h lists every option of {name})"


def _prepare_environment(executor: str | None = None, make_home: bool = True) -> Path:
    """What every process a command starts must share, set in this process's environment: the data root, absolute
    (``ENVSIM_DATA_ROOT``; ``./forge`` runs from the repository root, so by default ``<repo>/data``), and one Dagster
    run history per data root (``DAGSTER_HOME``, default ``<data root>/.dagster_home``, with the project's
    ``dagster.yaml``: the UI, its plots, the sensors and ``./forge run``'s timings see only this root's runs; made
    only with ``make_home``); ``executor``: the ``ENVSIM_EXECUTOR`` when none is set. Returns the data root."""
    from pipeline.core.settings import settings, variable

    current = settings()
    root = current.data_root.resolve()
    os.environ[variable("data_root")] = str(root)
    if executor and "executor" not in current.model_fields_set:
        os.environ[variable("executor")] = executor
    home = Path(os.environ.get("DAGSTER_HOME") or root / ".dagster_home")
    os.environ["DAGSTER_HOME"] = str(home)
    if not make_home:
        return root
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if not config.is_file():
        config.write_text((ROOT / "dagster.yaml").read_text())
    elif "\npython_logs:" not in "\n" + config.read_text():
        # a home set up before the console defaulted to INFO (dagster.yaml's python_logs) gets that setting too
        with config.open("a") as out:
            out.write("python_logs:\n  python_log_level: INFO\n")
    return root


def _call(command: list[str]) -> int:
    sys.stdout.flush()
    sys.stderr.flush()
    return subprocess.run(command).returncode


def _exec(command: list[str]) -> int:
    """Replace this process by ``command`` (its exit status is the command's)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(command[0], command)
    return 127  # not reached


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
        epilog="environment: ENVSIM_DATA_ROOT (default ./data), ENVSIM_PROFILE (default|small), ENVSIM_SHARDS,\n"
        "ENVSIM_SANDBOX_WORKERS, ... (docs/settings.md). ./forge --help lists every command.",
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


def run(argv: list[str]) -> int:
    """``./forge run``: check the settings, build the run config once (``-c``... and ``--config-json``) and have
    Dagster validate it, then launch ``envsim_main`` with exactly that config (``dg launch``, in one process: no
    per-step interpreter start-up; with ``ENVSIM_SHARDS``, first the catalog and every partition of collection +
    labeling as its own run, ``ENVSIM_PARALLEL_RUNS`` side by side), and report on this run only: its timings, then
    its failed step and the one-line cause, or the summary. The exit status is the run's (or the summary's)."""
    args = run_parser().parse_args(argv)  # an unknown option or argument: one line naming ./forge run's options
    warnings.simplefilter("ignore")  # the checks and the report print only their lines (dg launch shows its own)
    from pipeline.__main__ import settings_problems

    problems = settings_problems()
    for line in problems:
        _say(line, file=sys.stderr)
    if problems:
        return 2
    # the UI and the daemon keep Dagster's multiprocess executor; ENVSIM_EXECUTOR chooses another (docs/scale-out.md).
    # Set before the check: Dagster validates the run config against the job with the executor the run will have.
    root = _prepare_environment(executor="in_process", make_home=False)  # nothing is written before the checks
    from assets import launch
    from pipeline.core.settings import settings
    from pipeline.envs.partitions import partition_keys

    run_config, problems = launch.load_run_config(args.config, args.config_json, seed=args.seed)
    if not problems:
        given = (
            args.config
            + (["--config-json"] if args.config_json else [])
            + (["--seed"] if args.seed is not None else [])
        )
        where = " and ".join(given) or "run config"
        problems = launch.check_launch(MAIN_JOB, run_config, where=where)
    for line in problems:
        _say(f"./forge run: {line}", file=sys.stderr)
    if problems:
        return 2
    _prepare_environment()
    status = 0
    current = settings()
    if current.shards:  # partitioned (docs/scale-out.md): the catalog, then each partition's trajectories -> steps
        status = _call(launch.dg_launch("--assets", "environment_catalog"))
        if status:
            return status
        keys = partition_keys(current.shards)
        with ThreadPoolExecutor(max_workers=current.parallel_runs or os.cpu_count() or 1) as pool:
            codes = list(
                pool.map(lambda key: _call(launch.dg_launch("--job", "collect_and_label", "--partition", key)), keys)
            )
        status = next((code for code in codes if code), 0)
    started = time.time_ns()
    # a failed run (e.g. a check made blocking by ENVSIM_STRICT=1) ends with its failed step and the cause
    status = _call(launch.dg_launch("--job", MAIN_JOB, run_config=run_config)) or status
    _say(f"{MAIN_JOB}: {(time.time_ns() - started) // 1_000_000} ms wall, including the dg CLI's start-up")
    return launch.report(MAIN_JOB, since=started // 1_000_000_000 - 1, data_root=str(root), status=status)


def _report_parser(name: str, what: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"./forge {name}", description=what)
    parser.add_argument("--job", default=MAIN_JOB)
    parser.add_argument("--since", type=float, help="only a run created after this time (epoch seconds)")
    parser.add_argument("--data-root", help="only a run of this data root")
    return parser


def _run_history(name: str, data_root: str | None) -> bool:
    """The run history ``./forge run`` keeps for a data root (``--data-root``, default the settings'): ``DAGSTER_HOME``
    when set, else ``<data root>/.dagster_home``. False, after one line, when there is none."""
    from pipeline.core.settings import settings

    if not os.environ.get("DAGSTER_HOME"):
        os.environ["DAGSTER_HOME"] = str(Path(data_root or settings().data_root).resolve() / ".dagster_home")
    if Path(os.environ["DAGSTER_HOME"]).is_dir():
        return True
    _say(
        f"./forge {name}: no run history at {os.environ['DAGSTER_HOME']}: ./forge run has not run on this data root "
        "(or set DAGSTER_HOME)",
        file=sys.stderr,
    )
    return False


def report(argv: list[str]) -> int:
    """``./forge report``: what the latest run did (what ``./forge run`` prints after its run)."""
    parser = _report_parser(
        "report",
        "What the latest run did: its time per step, then its failed steps with their "
        "one-line causes, or the summary of the data with what the run changed.",
    )
    parser.add_argument("--status", type=int, default=0, help="the launcher's exit status")
    args = parser.parse_args(argv)
    if not _run_history("report", args.data_root):
        return args.status or 1
    from assets import launch

    return launch.report(args.job, since=args.since, data_root=args.data_root, status=args.status)


def timings(argv: list[str]) -> int:
    """``./forge timings``: the latest run's time per step (exit 3: no such run)."""
    args = _report_parser("timings", "The latest run's time per step and outside the steps.").parse_args(argv)
    if not _run_history("timings", args.data_root):
        return 3
    from assets import launch

    return 0 if launch.print_run_timings(args.job, since=args.since, data_root=args.data_root) else 3


def ui(argv: list[str]) -> int:
    """``./forge ui``: the Dagster UI (``dg dev`` on the project's workspace, ``assets/dev_ui.py``), on this data
    root's run history, until a signal stops it (:func:`_serve_ui`)."""
    if "-h" in argv or "--help" in argv:  # dg dev's own -h is the host
        return _exec([str(BIN / "dg"), "dev", "--help"])
    _prepare_environment()
    return _serve_ui([sys.executable, "-m", "assets.dev_ui", "-w", str(ROOT / "workspace.yaml"), *argv])


#: seconds the UI's processes get to end after ``dg dev`` has (then they are killed)
UI_GRACE_S = 5.0


def _die_with_parent() -> None:
    """In a child, before it runs: SIGTERM when the process that started it dies (Linux ``PR_SET_PDEATHSIG``), so a
    ``./forge ui`` killed with SIGKILL still stops ``dg dev``, which then stops its own processes."""
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):  # not Linux: the other signals still stop it
        pass


def _ui_child() -> None:
    """The UI's set-up in the child: the interrupt signals at their defaults (a job started in the background by a
    script inherits SIGINT ignored, and Dagster maps SIGTERM to SIGINT's handler, so both were ignored), and it dies
    with ``./forge ui``."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _die_with_parent()


def _group_alive(pgid: int) -> bool:
    """Whether a live process (not a zombie waiting for its parent to reap it) is in process group ``pgid``."""
    proc = Path("/proc")
    if not proc.is_dir():  # no procfs: any process of the group, zombies included
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        return True
    for stat in proc.glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()  # after "pid (comm)": state, ppid, pgrp, ...
        except (OSError, IndexError):  # the process ended meanwhile
            continue
        if fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
            return True
    return False


def _serve_ui(command: list[str]) -> int:
    """Run the UI (``command``: ``dg dev`` and the webserver, daemon and code servers it starts) in a process group
    of its own, and stop it when this process gets SIGINT (Ctrl-C), SIGTERM or SIGHUP, also when it runs in the
    background: ``dg dev`` is interrupted once (it stops the webserver and the daemon, which stop their code
    servers), and whatever of its process group is still there after it ended is ended too (SIGTERM, then SIGKILL
    after :data:`UI_GRACE_S`); a second signal kills the group at once. Exit 0 when a signal stopped it, else
    ``dg dev``'s status."""
    sys.stdout.flush()
    sys.stderr.flush()
    child = subprocess.Popen(command, process_group=0, preexec_fn=_ui_child)
    stops: list[int] = []

    def stop(signum: int, _frame: object) -> None:
        stops.append(signum)
        try:
            if len(stops) == 1:
                os.kill(child.pid, signal.SIGINT)  # dg dev's KeyboardInterrupt: its own orderly shutdown
            else:
                os.killpg(child.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, stop)
    try:
        code = child.wait()
    finally:
        for sig, wait in ((signal.SIGTERM, UI_GRACE_S), (signal.SIGKILL, UI_GRACE_S)):
            if not _group_alive(child.pid):
                break
            try:
                os.killpg(child.pid, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + wait
            while _group_alive(child.pid) and time.monotonic() < deadline:
                time.sleep(0.1)
    return 0 if stops else code


def test(argv: list[str]) -> int:
    """``./forge test [PYTEST ARGS]``: pytest with the arguments as given (pyproject's addopts apply)."""
    if "-h" not in argv and "--help" not in argv:
        _prepare_environment()
    return _exec([sys.executable, "-m", "pytest", *argv])


def bench(argv: list[str]) -> int:
    """``./forge bench``: sandbox labeling throughput (the arguments go to benchmarks/bench_labeling.py), then the
    evaluation harness."""
    parser = argparse.ArgumentParser(
        prog="./forge bench",
        description=(
            "Run the benchmarks: benchmarks/bench_labeling.py (sandbox labeling throughput and peak memory; the other "
            "arguments are its own: --workers N..., --repeat N, --pack-calls N), then benchmarks/bench_harness.py "
            "(evaluation harness throughput)."
        ),
    )
    _, rest = parser.parse_known_args(argv)
    _prepare_environment()
    return _call([sys.executable, str(ROOT / "benchmarks" / "bench_labeling.py"), *rest]) or _call(
        [sys.executable, str(ROOT / "benchmarks" / "bench_harness.py")]
    )


def bench_scale(argv: list[str]) -> int:
    """``./forge bench-scale``: benchmarks/bench_scale.py with the arguments as given."""
    if "-h" not in argv and "--help" not in argv:
        _prepare_environment()
    return _exec([sys.executable, str(ROOT / "benchmarks" / "bench_scale.py"), *argv])


def _pipeline(name: str) -> Callable[[list[str]], int]:
    """A command of ``pipeline/__main__.py`` (its home), named ``./forge NAME`` in its usage."""

    def command(argv: list[str]) -> int:
        from pipeline.__main__ import main

        return main([name, *argv], prog="./forge")

    return command


def bench_model(argv: list[str]) -> int:
    """``./forge bench-model``: the weights are checked first (one line saying how to provide them), before
    ``./forge train-env`` installs the 2 GB serving environment; then the model is served and scored."""
    score = _pipeline("bench-model")
    if "-h" in argv or "--help" in argv:
        return score(argv)
    code = score(["--check", *argv])
    if code or "--check" in argv:
        return code
    code = subprocess.run([str(ROOT / "forge"), "train-env"], stdout=subprocess.DEVNULL).returncode
    return code or score(argv)


def sql(argv: list[str]) -> int:
    """``./forge sql [QUERY]``: SQL on the data root's ``envsim.duckdb``, a query or a prompt (docs/sql.md)."""
    from pipeline.core.settings import settings
    from pipeline.store import sql_shell

    return sql_shell.main(argv, settings().data_root)


def _not_set_up(name: str, argv: list[str]) -> int:
    """A command whose tool is not installed here: its help is the usage and how to set up; else one line, exit 2."""
    if "-h" in argv or "--help" in argv:
        _say(USAGE)
        _say(_set_up_note(name))
        return 0
    _say(
        f"./forge {name}: the project's environment is not set up here: run ./forge setup (or ./forge {name})",
        file=sys.stderr,
    )
    return 2


#: every command, in the usage's order
COMMANDS = {
    c.name: c
    for c in (
        Command("run", run),
        Command("test", test),
        Command("ui", ui),
        Command("bench", bench),
        Command("bench-scale", bench_scale),
        Command("bench-model", bench_model),
        Command("download", _pipeline("download")),
        Command("summary", _pipeline("summary")),
        Command("sql", sql),
        Command("report", report),
        Command("timings", timings),
        Command("check-settings", _pipeline("check-settings")),
        Command("partitions", _pipeline("partitions")),
        Command("train-env", None),
        Command("serve-env", None),
        Command("setup", None),
    )
}


def main(argv: list[str] | None = None) -> int:
    """``./forge COMMAND [ARGS]`` (no command: ``run``); ``-h``/``--help``/``help``: the usage."""
    argv = list(sys.argv[1:] if argv is None else argv)
    name, args = (argv[0], argv[1:]) if argv else ("run", [])
    if name in ("-h", "--help", "help"):
        _say(USAGE)
        return 0
    command = COMMANDS.get(name)
    if command is None:
        _say(f"./forge: unknown command '{name}': run ./forge --help for the commands", file=sys.stderr)
        return 2
    wants_help = "-h" in args or "--help" in args
    if command.run is None:  # ./forge's own set-up commands
        if wants_help:
            _say(USAGE)
            return 0
        _say(f"./forge {name} builds an environment: run it as ./forge {name}", file=sys.stderr)
        return 2
    if importlib.util.find_spec("dagster") is None:  # the machine's python3 (a tree without .venv): installs nothing
        if name == "run" and wants_help:
            run_parser().parse_args(args)  # its parser is the standard library's: prints the help, exits 0
        return _not_set_up(name, args)
    from pipeline.core.settings import SettingsError, prepare_process

    prepare_process()  # first, before anything imports pyarrow
    try:
        return command.run(args)
    except SettingsError as exc:  # an ENVSIM_* variable no command can use (./forge run names them all first)
        _say(f"./forge {name}: {exc}: fix the value or unset the variable", file=sys.stderr)
        return 2


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # the reader went away (./forge --help | head): no traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
