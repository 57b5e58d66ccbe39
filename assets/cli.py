"""The one CLI: ``./forge COMMAND ARGS`` sets up ``.venv/`` and runs ``python -m assets.cli COMMAND ARGS``. Each
command is one function (``argv`` in, the exit status out) and one entry of :data:`COMMANDS`, a registry that
installed plugin packages add to by entry point (``envsim_forge.commands``, docs/extending.md); ``setup``,
``train-env``, ``serve-venv`` and ``openenv-env`` are ``./forge``'s own (only their help is here). The settings are
read here and passed on as values (the data root resolved once, :func:`data_root`); a process a command starts gets
them in its environment (:func:`child_env`); this process's environment is only read. Only the standard library is
imported at the top, so ``COMMAND -h`` works without ``.venv`` (with the machine's python3)."""

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
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from pipeline.core.processes import end_descendants
from pipeline.core.registry import Registry

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent  # the environment's scripts: dg

#: the main job ``./forge run`` launches
MAIN_JOB = "envsim_main"


@dataclass(frozen=True)
class Command:
    """A command of ``./forge``: ``run`` takes its arguments and returns the exit status (None for the set-up
    commands ``./forge`` runs itself); ``usage`` is its part of ``./forge --help`` after its name (the synopsis and
    what it does; more lines indented)."""

    name: str
    run: Callable[[list[str]], int] | None
    usage: str


#: every command, in the usage's order; installed plugins' commands after them (docs/extending.md)
COMMANDS: Registry[Command] = Registry("command", "envsim_forge.commands", check=lambda c: isinstance(c, Command))


def command(usage: str) -> Callable[[Callable[[list[str]], int]], Callable[[list[str]], int]]:
    """Register the decorated function as a command named after it (``_`` as ``-``), with its ``usage``."""

    def register(run: Callable[[list[str]], int]) -> Callable[[list[str]], int]:
        COMMANDS.register(Command(run.__name__.replace("_", "-"), run, usage))
        return run

    return register


def usage() -> str:
    """``./forge --help``: every command of :data:`COMMANDS` with its usage."""
    lines = [f"  {c.name} {c.usage}" for c in COMMANDS.values()]
    return (
        "usage: ./forge COMMAND [OPTIONS]   (./forge COMMAND -h: that command's options)\n\n" + "\n".join(lines) + "\n"
    )


def _say(line: str, file=None) -> None:
    print(line, file=file or sys.stdout, flush=True)


def _problems(lines: list[str], prefix: str = "") -> bool:
    """Say each problem on stderr, one line each; whether there was any."""
    for line in lines:
        _say(prefix + line, file=sys.stderr)
    return bool(lines)


def data_root(given: str | Path | None = None) -> Path:
    """The data root, absolute: ``given`` (a ``--data-root``), else the settings' (``ENVSIM_DATA_ROOT``, default
    ``./data``; ``./forge`` runs from the repository root, so ``<repo>/data``). The one place it is resolved."""
    from pipeline.core.settings import settings

    return Path(given or settings().data_root).expanduser().resolve()


def dagster_home(root: Path, make: bool = True) -> Path:
    """The run history of the data root ``root``: ``DAGSTER_HOME`` when the user set one, else
    ``<root>/.dagster_home``; with ``make``, created with the project's ``dagster.yaml``. The UI, its plots, the
    sensors and ``./forge run``'s timings all read this one home."""
    home = Path(os.environ.get("DAGSTER_HOME") or root / ".dagster_home")
    if not make:
        return home
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if not config.is_file():
        config.write_text((ROOT / "dagster.yaml").read_text())
    return home


def child_env() -> dict[str, str]:
    """The environment of a process a command starts (the UI, pytest, the benchmarks): this one's, with the data
    root absolute and its run history (made), so that every process it starts shares them."""
    root = data_root()
    return {**os.environ, "ENVSIM_DATA_ROOT": str(root), "DAGSTER_HOME": str(dagster_home(root))}


def _call(argv: list[str], env: dict[str, str] | None = None) -> int:
    sys.stdout.flush()
    sys.stderr.flush()
    return subprocess.run(argv, env=env).returncode


def _exec(argv: list[str], env: dict[str, str]) -> int:
    """Replace this process by ``argv`` (its exit status is the command's)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(argv[0], argv, env)
    return 127  # not reached


def _wants_help(argv: list[str]) -> bool:
    return "-h" in argv or "--help" in argv


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


def settings_problems() -> list[str]:
    """What is wrong with the ``ENVSIM_*`` variables, one line each naming the variable and the fix, then with the
    data root they name (a file, not writable, no space left: :func:`pipeline.store.layout.root_problems`)
    (``./forge run`` and ``./forge ui`` check this before they start anything)."""
    from pipeline.core.settings import SettingsError, settings  # choices are Literals of Settings: checked there
    from pipeline.store.layout import root_problems

    try:
        settings()
    except SettingsError as exc:
        return [f"{exc}: fix the value or unset the variable"]
    return root_problems(data_root())


def launch_settings():  # -> Settings (pydantic is not imported at the top: COMMAND -h works without .venv)
    """The settings of a job ``./forge`` runs in this process: the process's, with the data root resolved and the
    in-process executor unless ``ENVSIM_EXECUTOR`` chooses another (the UI and the daemon keep Dagster's multiprocess
    executor; docs/scale-out.md). Dagster validates the run config against the job with the executor it will have."""
    from pipeline.core.settings import settings

    current = settings()
    executor = {} if "executor" in current.model_fields_set else {"executor": "in_process"}
    return current.model_copy(update={"data_root": data_root(), **executor})


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
    definitions built once from them, then that job run with that config in this process (``assets/launch.py``) and
    reported on. The exit status is the run's (or the summary's)."""
    args = run_parser().parse_args(argv)  # an unknown option or argument: one line naming ./forge run's options
    if _problems(settings_problems()):
        return 2
    current = launch_settings()
    with warnings.catch_warnings():  # the checks print only their lines (the run shows Dagster's warnings)
        warnings.simplefilter("ignore")
        from assets import launch

        run_config, problems = launch.load_run_config(args.config, args.config_json, seed=args.seed)
        if not problems:
            given = args.config + ["--config-json"] * bool(args.config_json) + ["--seed"] * (args.seed is not None)
            problems = launch.check_launch(MAIN_JOB, run_config, current, where=" and ".join(given) or "run config")
    if _problems(problems, "./forge run: "):
        return 2  # nothing written: no data root, no run history
    _repair_index(current.data_root, "run")
    home = dagster_home(current.data_root)
    try:
        return launch.launch(current, home, run_config)
    except Exception as exc:  # a full disk under Dagster's own run history: one line, no traceback
        code = launch.failed_on_full_disk(exc, home, current.data_root)
        if code is None:
            raise
        return code


def _repair_index(root: Path, name: str) -> None:
    """The data root's ``envsim.duckdb`` made again from the Parquet tables when it is empty, invalid or missing
    (:func:`pipeline.store.duck.repair_index`), saying so in one line."""
    from pipeline.store.duck import repair_index
    from pipeline.store.layout import DataLayout

    line = repair_index(DataLayout.at(root))
    if line:
        _say(f"./forge {name}: {line}", file=sys.stderr)


@command(
    """[--seed N]   run weekly_splits' job (regenerate_splits) now, on the data root's run history (the UI's)
                --seed N   the seed of both splits (default: this ISO week's, 202648 in week 48 of 2026, as the
                           schedule draws it)"""
)
def regenerate(argv: list[str]) -> int:
    """``./forge regenerate``: the job of the schedule ``weekly_splits`` (re-stratify, new benchmark and mixture
    versions, their exports and evaluation) run now in this process on the data root's Dagster home, so the run is
    in the UI's history; then its report (:func:`assets.launch.report`). The exit status is the run's."""
    parser = argparse.ArgumentParser(
        prog="./forge regenerate",
        description="Run the job of the schedule weekly_splits (regenerate_splits) now, on the data root's run "
        "history (the one ./forge ui shows), and print what it changed.",
    )
    parser.add_argument("--seed", type=int, metavar="N", help="the seed of both splits (default: this ISO week's)")
    args = parser.parse_args(argv)
    if _problems(settings_problems()):
        return 2
    from datetime import UTC, datetime

    from assets import launch
    from assets.automation import week_seed

    current = launch_settings()
    seed = week_seed(datetime.now(UTC)) if args.seed is None else args.seed
    _repair_index(current.data_root, "regenerate")
    return launch.regenerate(current, dagster_home(current.data_root), seed)


def _report_parser(name: str, what: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"./forge {name}", description=what)
    parser.add_argument("--job", default=MAIN_JOB)
    parser.add_argument("--since", type=float, help="only a run created after this time (epoch seconds)")
    parser.add_argument("--data-root", help="the data root whose runs count (default: ENVSIM_DATA_ROOT or ./data)")
    return parser


def _run_history(name: str, root: Path) -> Path | None:
    """The run history ``./forge run`` keeps for the data root ``root`` (:func:`dagster_home`), or None after one
    line when there is none."""
    home = dagster_home(root, make=False)
    if home.is_dir():
        return home
    _say(
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
    from assets import launch
    from pipeline.core.settings import settings

    return launch.report(home, root, args.job, since=args.since, status=args.status, current=settings())


@command("[--since EPOCH] [--data-root DIR]   the latest run's time per step")
def timings(argv: list[str]) -> int:
    """``./forge timings``: the latest run's time per step (exit 3: no such run)."""
    args = _report_parser("timings", "The latest run's time per step and outside the steps.").parse_args(argv)
    root = data_root(args.data_root)
    home = _run_history("timings", root)
    if home is None:
        return 3
    from assets import launch

    return 0 if launch.print_run_timings(home, root, args.job, since=args.since) else 3


@command("[PYTEST ARGS]   set up, run the test suite (e.g. ./forge test -m 'not slow' -x)")
def test(argv: list[str]) -> int:
    """``./forge test [PYTEST ARGS]``: pytest with the arguments as given (pyproject's addopts apply)."""
    return _exec([sys.executable, "-m", "pytest", *argv], dict(os.environ) if _wants_help(argv) else child_env())


def ui_parser() -> argparse.ArgumentParser:
    """``./forge ui``'s options: the ``dg dev`` options docs/ui.md uses (``-h`` is the help here, not dg dev's host);
    every other ``dg dev`` option is passed on as it is."""
    parser = argparse.ArgumentParser(
        prog="./forge ui",
        description=(
            "Start the Dagster UI (dg dev -w workspace.yaml) on this data root's run history until Ctrl-C or a signal "
            "(SIGTERM, SIGINT, SIGHUP) stops it. Any other option of dg dev (dg dev --help) is passed on as it is."
        ),
    )
    parser.add_argument("-p", "--port", type=int, help="the webserver's port (default 3000)")
    parser.add_argument("--host", help="the webserver's host (default 127.0.0.1)")
    return parser


@command("           set up, start the Dagster UI (dg dev) on http://127.0.0.1:3000")
def ui(argv: list[str]) -> int:
    """``./forge ui``: the Dagster UI (``dg dev`` on the project's workspace, ``assets/dev_ui.py``), on this data
    root's run history, until a signal stops it (:func:`_serve_ui`)."""
    parser = ui_parser()
    if _wants_help(argv):
        parser.print_help()
        return 0
    parser.parse_known_args(argv)  # a value that does not parse (-p abc) is one usage error, exit 2
    if _problems(settings_problems(), "./forge ui: "):
        return 2
    env = child_env()
    return _serve_ui([sys.executable, "-m", "assets.dev_ui", "-w", str(ROOT / "workspace.yaml"), *argv], env)


@command("        set up, run the benchmarks (sandbox labeling throughput, evaluation harness)")
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
    env = child_env()
    return _call([sys.executable, str(ROOT / "benchmarks" / "bench_labeling.py"), *rest], env) or _call(
        [sys.executable, str(ROOT / "benchmarks" / "bench_harness.py")], env
    )


def _serve_env_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="./forge serve-env",
        description=(
            "Serve every task of the run config's sources (the default: the builtin pack and bfcl) to agent-RL "
            "trainers over the OpenEnv protocol (WS /ws sessions, /health, /schema, /state, POST /reset and /step; "
            "docs/rl.md), each session a live sandboxed environment; served episodes are appended to "
            "DATA_ROOT/served/episodes.jsonl. Stops on Ctrl-C / SIGTERM."
        ),
    )
    p.add_argument("-c", "--config", action="append", default=[], metavar="FILE", help="run config YAML (repeatable)")
    p.add_argument("--mode", choices=("exec", "sim", "shadow"), default="exec", help="who answers (default: exec)")
    p.add_argument(
        "--simulator",
        default=None,
        help="sim/shadow: oracle, no_change, or a JSON simulator spec as simulator_eval's `simulators` items "
        '(\'{"name": "m", "kind": "openai", "model": "...", "base_url": "..."}\')',
    )
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000, help="port (0: any free one; the URL is printed)")
    p.add_argument("--max-sessions", type=int, default=256, help="live sessions at most (more: CAPACITY_REACHED)")
    p.add_argument("--idle-timeout", type=float, default=900.0, help="seconds before an idle session is closed")
    p.add_argument("--max-steps", type=int, default=30, help="tool calls per episode (then done: true)")
    return p


@command("[-c FILE] [--mode exec|sim|shadow] [--port N]   serve every task to agent-RL trainers (OpenEnv)")
def serve_env(argv: list[str]) -> int:
    """``./forge serve-env``: :func:`pipeline.serve.run.serve` over the run config's tasks."""
    args = _serve_env_parser().parse_args(argv)
    import json as _json

    from assets.launch import load_run_config
    from pipeline.core.settings import settings as current_settings
    from pipeline.evaluate.simulators import make_simulator, simulator_spec
    from pipeline.serve.run import serve
    from pipeline.serve.tasks import load_tasks
    from pipeline.store.layout import DataLayout
    from resources.environments import EnvironmentSourcesResource

    run_config, problems = load_run_config(args.config)
    if _problems(problems):
        return 2
    simulator = None
    if args.mode != "exec":
        if not args.simulator:
            _say(f"--mode {args.mode} needs --simulator (oracle, no_change, or a JSON simulator spec)", sys.stderr)
            return 2
        spec = _json.loads(args.simulator) if args.simulator.lstrip().startswith("{") else {"name": args.simulator}
        spec.setdefault("kind", spec["name"])
        simulator = make_simulator(simulator_spec(**spec))
    resources = run_config.get("resources") or {}
    sources = (resources.get("sources") or {}).get("config") or {}
    root = data_root(((resources.get("store") or {}).get("config") or {}).get("data_root"))
    cfg = EnvironmentSourcesResource(**sources).config(DataLayout.at(root))
    tasks = load_tasks(cfg)
    checked = sum(1 for t in tasks if t.checks)

    def ready(url: str) -> None:
        ws = url.replace("http", "ws", 1)
        _say(f"serving {len(tasks)} tasks ({checked} with executable checks) at {url} (WebSocket {ws}/ws)")
        _say(f"mode {args.mode}; served episodes are appended to {root / 'served' / 'episodes.jsonl'}")
        _say("stop it with Ctrl-C (or SIGTERM)")

    serve(
        tasks,
        args.mode,
        simulator,
        args.host,
        args.port,
        args.max_sessions,
        args.idle_timeout,
        isolation=current_settings().sandbox,
        episodes=root / "served" / "episodes.jsonl",
        on_ready=ready,
        max_steps=args.max_steps,
    )
    _say("stopped: every session and sandbox process ended")
    return 0


@command("[--sessions N ...] [--calls N]   steps/s through the serve-env WebSocket server vs labeling")
def bench_env_server(argv: list[str]) -> int:
    """``./forge bench-env-server``: benchmarks/bench_env_server.py with the arguments as given."""
    env = dict(os.environ) if _wants_help(argv) else child_env()
    return _exec([sys.executable, str(ROOT / "benchmarks" / "bench_env_server.py"), *argv], env)


@command("[--steps N ...] [--naive]   stratify -> select -> export on synthetic corpora (functions, assets)")
def bench_scale(argv: list[str]) -> int:
    """``./forge bench-scale``: benchmarks/bench_scale.py with the arguments as given."""
    env = dict(os.environ) if _wants_help(argv) else child_env()
    return _exec([sys.executable, str(ROOT / "benchmarks" / "bench_scale.py"), *argv], env)


def _bench_model_parser() -> argparse.ArgumentParser:
    from pipeline.training import base_models

    b = argparse.ArgumentParser(
        prog="./forge bench-model",
        description="Serve a model with llamafactory-cli api (the project's serving) and score it with the "
        "evaluation harness on the first N samples of every benchmark cell; prints parse rate, "
        "FM, CM and cm_reference per cell and stores them in DuckDB (eval_results, "
        "bench_model_runs) under the weights' id.",
    )
    b.add_argument(
        "--checkpoint",
        default=base_models.DEFAULT_MODEL,
        help=f"an embedded model ({', '.join(base_models.EMBEDDED)}), a checkpoint version, 'latest', "
        f"<version>/step-N, a directory, or a Hub id whose snapshot is in the local Hugging Face cache "
        f"(HF_HOME / HF_HUB_CACHE; nothing is downloaded) (default: {base_models.DEFAULT_MODEL})",
    )
    b.add_argument("--per-cell", type=int, default=1, help="samples per benchmark cell (default 1)")
    b.add_argument("--max-tokens", type=int, default=512, help="most tokens per answer (default 512)")
    b.add_argument(
        "--backend",
        choices=["huggingface", "vllm", "auto"],
        default="huggingface",
        help="llamafactory-cli api backend (default huggingface; a before/after comparison must use one)",
    )
    b.add_argument(
        "--template",
        default=None,
        help="chat template (default: the one recorded with a checkpoint or an "
        "embedded model; needed for any other model, e.g. qwen)",
    )
    b.add_argument("--split-version", default=None, help="benchmark version (default: CURRENT)")
    b.add_argument("--data-root", default=None, help="default: ENVSIM_DATA_ROOT or ./data")
    b.add_argument("--timeout", type=float, default=900.0, help="seconds per request (default 900)")
    b.add_argument(
        "--dtype",
        choices=["auto", "float16", "bfloat16", "float32"],
        default=None,
        help="served compute dtype (default: auto with an NVIDIA GPU, else float32)",
    )
    b.add_argument(
        "--check",
        action="store_true",
        help="only check that --checkpoint's weights are here and its chat template is known (what ./forge "
        "bench-model does before it installs the serving environment); exit 2 with one line if not",
    )
    return b


@command("[--checkpoint REF] [--per-cell N] [--max-tokens N] ...   score a served model on the benchmark")
def bench_model(argv: list[str]) -> int:
    """``./forge bench-model``: the weights are checked first (one line saying how to provide them), before
    ``./forge train-env`` installs the 2 GB serving environment; then the model is served and scored."""
    args = _bench_model_parser().parse_args(argv)
    from pipeline.core.settings import settings
    from pipeline.report.tables import md_table
    from pipeline.store import duck
    from pipeline.training.bench_model import ModelUnavailable, bench_model, check_model
    from pipeline.training.launchers import find_llamafactory

    current = settings()
    duck.configure(current)
    root = data_root(args.data_root)
    try:
        found = check_model(args.checkpoint, root, args.template)
        if args.check:
            _say(f"./forge bench-model --check: {found}: ready to serve")
            return 0
        if not current.llamafactory_python:  # else the environment named is used as it is
            code = subprocess.run([str(ROOT / "forge"), "train-env"], stdout=subprocess.DEVNULL).returncode
            if code:
                return code
        python, cli = find_llamafactory(current.llamafactory_python)
        result = bench_model(
            root,
            python,
            cli,
            args.checkpoint,
            args.per_cell,
            args.max_tokens,
            args.backend,
            args.template,
            args.split_version,
            args.timeout,
            dtype=args.dtype,
        )
    except ModelUnavailable as exc:
        _say(f"./forge bench-model: {exc}", file=sys.stderr)
        return 2
    _say(
        f"{result.run_id}: {result.scored} scored, {result.resumed} resumed of {result.samples} samples "
        f"in {result.seconds:.0f}s (weights {result.weights_id})"
    )
    _say(md_table(result.cells, index=False))
    _say("stored in DuckDB: eval_results / eval_runs (run_id above), bench_model_runs")
    return 0


@command("envscaler [--endpoint URL] [--data-root DIR] ...   fetch the EnvScaler corpus into the data root")
def download(argv: list[str]) -> int:
    """``./forge download envscaler``: EnvScaler's released corpus from the Hugging Face Hub into the data root."""
    from pipeline.envs import download as hub

    d = argparse.ArgumentParser(prog="./forge download", description="fetch a corpus from the Hugging Face Hub")
    d.add_argument("corpus", choices=["envscaler"])
    d.add_argument("--data-root", default=None, help="default: ENVSIM_DATA_ROOT or ./data")
    d.add_argument("--endpoint", default=None, help="Hub endpoint (default: HF_ENDPOINT or https://huggingface.co)")
    d.add_argument("--env-repo", default=hub.ENV_REPO, help=f"dataset repo of the env items (default {hub.ENV_REPO})")
    d.add_argument(
        "--scenario-repo",
        action="append",
        default=None,
        help=f"dataset repo(s) of scenarios (default: {', '.join(hub.SCENARIO_REPOS)})",
    )
    d.add_argument("--revision", default=None)
    args = d.parse_args(argv)
    root = data_root(args.data_root)
    try:
        result = hub.download_envscaler(
            root,
            endpoint=args.endpoint,
            token=None,  # huggingface_hub resolves: $HF_TOKEN, `hf auth login`
            env_repo=args.env_repo,
            scenario_repos=tuple(args.scenario_repo or hub.SCENARIO_REPOS),
            revision=args.revision,
        )
    except hub.DownloadError as exc:
        _say(f"./forge download: {exc}", file=sys.stderr)
        return 1
    _say(f"env items: {result.env_items}")
    for path in result.scenarios:
        _say(f"scenarios: {path}")
    _say(
        f"recorded in {result.directory / hub.CORPUS_FILE}: the sources resource uses it by default "
        f"(./forge run with ENVSIM_DATA_ROOT={root})"
    )
    return 0


@command("[DATA_ROOT]   print where the data is and what it holds (what ./forge run prints last)")
def summary(argv: list[str]) -> int:
    """``./forge summary [DATA_ROOT]``: the summary of the data (:func:`assets.summary.summary`)."""
    parser = argparse.ArgumentParser(prog="./forge summary", description="print where the data is and what it holds")
    parser.add_argument("data_root", nargs="?", default=None)
    args = parser.parse_args(argv)
    from assets.summary import summary as print_summary
    from pipeline.store.layout import DataLayout

    return print_summary(DataLayout.at(data_root(args.data_root)))


@command("[QUERY] [--data-root DIR]   run SQL on the data root's envsim.duckdb and print the table; no QUERY: a prompt")
def sql(argv: list[str]) -> int:
    """``./forge sql [QUERY]``: SQL on the data root's ``envsim.duckdb``, a query or a prompt (docs/sql.md)."""
    from pipeline.store import sql_shell

    return sql_shell.main(argv, data_root())


@command("  check the ENVSIM_* variables (what ./forge run checks first)")
def check_settings(argv: list[str]) -> int:
    """``./forge check-settings``: one line per problem (exit 2), or one line saying which variables are set."""
    argparse.ArgumentParser(prog="./forge check-settings", description="check the ENVSIM_* variables").parse_args(argv)
    if _problems(settings_problems()):
        return 2
    from pipeline.core.settings import settings, variable

    current = settings()
    given = sorted(variable(name) for name in current.model_fields_set)
    which = f"{', '.join(given)} set, the others at their defaults" if given else "every variable at its default"
    _say(
        f"settings OK: {which} (docs/settings.md); profile {current.profile}, data root "
        f"{data_root()}, split schedule '{current.split_cron}' (UTC)"
    )
    return 0


@command("   print the partition keys ENVSIM_SHARDS gives")
def partitions(argv: list[str]) -> int:
    """``./forge partitions``: the partition keys ``ENVSIM_SHARDS`` gives, one a line (none when unset)."""
    argparse.ArgumentParser(prog="./forge partitions", description="the partition keys ENVSIM_SHARDS gives").parse_args(
        argv
    )
    from pipeline.core.settings import settings
    from pipeline.envs.partitions import partition_keys

    count = settings().shards
    print("\n".join(partition_keys(count)) if count else "", end="\n" if count else "")
    return 0


for _name, _usage in (
    ("train-env", "    create .venv-train/ (LLaMA-Factory, torch) for training and serving jobs"),
    ("serve-venv", "   GPU nodes: create .venv-serve/ (vLLM)"),
    ("openenv-env", "  create .venv-openenv/ (OpenEnv's own client, beside .venv's packages)"),
    ("setup", "        only set up .venv/"),
):
    COMMANDS.register(Command(_name, None, _usage))


#: seconds the UI's processes get to end after ``dg dev`` has (then they are killed)
UI_GRACE_S = 5.0


def _ui_child() -> None:
    """The UI's set-up in the child: the interrupt signals at their defaults (a job started in the background by a
    script inherits SIGINT ignored, and Dagster maps SIGTERM to SIGINT's handler, so both were ignored), and SIGTERM
    when ``./forge ui`` dies (Linux ``PR_SET_PDEATHSIG``), so a ``./forge ui`` killed with SIGKILL still stops
    ``dg dev``, which then stops its own processes."""
    import ctypes

    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):  # not Linux: the other signals still stop it
        pass


def _group_alive(pgid: int) -> bool:
    """Whether a live process (not a zombie waiting for its parent to reap it) is in process group ``pgid``."""
    for stat in Path("/proc").glob("[0-9]*/stat"):  # Linux (the sandbox needs it): procfs
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()  # after "pid (comm)": state, ppid, pgrp, ...
        except (OSError, IndexError):  # the process ended meanwhile
            continue
        if fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
            return True
    return False


def _serve_ui(argv: list[str], env: dict[str, str]) -> int:
    """Run the UI (``argv``: ``dg dev`` and the webserver, daemon and code servers it starts) in a process group
    of its own, and stop it when this process gets SIGINT (Ctrl-C), SIGTERM or SIGHUP, also when it runs in the
    background: ``dg dev`` is interrupted once (it stops the webserver and the daemon, which stop their code
    servers), and whatever of its process group is still there after it ended is ended too (SIGTERM, then SIGKILL
    after :data:`UI_GRACE_S`); a second signal kills the group at once. Exit 0 when a signal stopped it, else
    ``dg dev``'s status."""
    sys.stdout.flush()
    sys.stderr.flush()
    child = subprocess.Popen(argv, env=env, process_group=0, preexec_fn=_ui_child)
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


def _not_set_up(name: str, argv: list[str]) -> int:
    """A command whose tool is not installed here: its help is the usage and how to set up; else one line, exit 2."""
    if _wants_help(argv):
        _say(f"{usage()}\n(./forge setup first, then ./forge {name} -h lists every option of {name})")
        return 0
    _say(
        f"./forge {name}: the project's environment is not set up here: run ./forge setup (or ./forge {name})",
        file=sys.stderr,
    )
    return 2


def main(argv: list[str] | None = None) -> int:
    """``./forge COMMAND [ARGS]`` (no command: ``run``); ``-h``/``--help``/``help``: the usage."""
    argv = list(sys.argv[1:] if argv is None else argv)
    name, args = (argv[0], argv[1:]) if argv else ("run", [])
    if name in ("-h", "--help", "help"):
        _say(usage())
        return 0
    found = COMMANDS.find(name)
    if found is None:
        _say(f"./forge: unknown command '{name}': run ./forge --help for the commands", file=sys.stderr)
        return 2
    if found.run is None:  # ./forge's own set-up commands
        if _wants_help(args):
            _say(usage())
            return 0
        _say(f"./forge {name} builds an environment: run it as ./forge {name}", file=sys.stderr)
        return 2
    if importlib.util.find_spec("dagster") is None:  # the machine's python3 (a tree without .venv): installs nothing
        if name == "run" and _wants_help(args):
            run_parser().parse_args(args)  # its parser is the standard library's: prints the help, exits 0
        return _not_set_up(name, args)
    from pipeline.core.settings import SettingsError, prepare_process

    prepare_process()  # first, before anything imports pyarrow
    try:
        return found.run(args)
    except SettingsError as exc:  # an ENVSIM_* variable no command can use (./forge run names them all first)
        _say(f"./forge {name}: {exc}: fix the value or unset the variable", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # SIGINT, SIGTERM or SIGHUP: the command's finally blocks ran (its servers stopped)
        _say(f"./forge {name}: interrupted", file=sys.stderr)
        return 130


_interrupted: list[str] = []  # the signal that interrupted the command (only the first one interrupts)


def _raise_interrupt(signum: int, _frame: object) -> None:
    """Interrupt the command once: a second signal while its ``finally`` blocks stop what it started (``timeout``
    signals the command and then its whole process group; a user presses Ctrl-C twice) is let pass, so the
    clean-up (bounded by :func:`end_descendants`'s grace) completes and the one-line message stands."""
    if _interrupted:
        return
    _interrupted.append(signal.Signals(signum).name)
    raise KeyboardInterrupt(_interrupted[0])


def interrupt_on_signals() -> None:
    """The ``./forge`` process's set-up: SIGINT, SIGTERM and SIGHUP (``timeout``, a closed terminal, ``kill``) all
    interrupt a command as Ctrl-C does, also when it was started with SIGINT ignored (in the background of a
    script), so its ``finally`` blocks run: a model server it started is stopped. (``./forge run`` and ``./forge ui``
    supervise their own processes.)"""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _raise_interrupt)


if __name__ == "__main__":
    from assets.cli import interrupt_on_signals
    from assets.cli import main as forge  # the module plugins import (its Command, its COMMANDS), not this copy

    interrupt_on_signals()
    try:
        sys.exit(forge())
    except BrokenPipeError:  # the reader went away (./forge --help | head): no traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
    finally:
        end_descendants()  # any process the command started and did not stop goes with it
