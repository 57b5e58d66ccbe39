"""The Dagster code location (the only module of ``pipeline`` that imports dagster).

Configured by the ``ENVSIM_*`` variables (docs/settings.md; ``pipeline.core.settings``), read when the
code location loads: ``ENVSIM_SHARDS`` partitions ``trajectories`` and ``labeled_steps``
(``envsim_main`` then holds the unpartitioned assets and the job ``collect_and_label`` the partitioned
ones), ``ENVSIM_EXECUTOR`` (+ ``ENVSIM_MAX_CONCURRENT``, ``ENVSIM_EXECUTOR_CONFIG``) chooses the
executor, ``ENVSIM_LAUNCHER`` adds the ``training`` group. The data root is the ``store`` resource's
(default ``ENVSIM_DATA_ROOT``), configured at launch; the ``duckdb`` and ``launcher`` resources nest it.
"""

from pipeline.core.settings import EXECUTORS, Settings, prepare_process, settings

prepare_process()  # first, before anything imports pyarrow

from pathlib import Path  # noqa: E402
from typing import Mapping  # noqa: E402

import yaml  # noqa: E402
from dagster import (  # noqa: E402
    AssetSelection,
    Definitions,
    ExecutorDefinition,
    define_asset_job,
    in_process_executor,
    load_asset_checks_from_modules,
    load_assets_from_modules,
    multiprocess_executor,
)

from assets import automation, collection, environments, envsimbench, evaluation, export, labeling, selection, simulation, training  # noqa: E402
from assets.partitions import SHARDS  # noqa: E402
from pipeline.collect.sources import SourceError, check_files  # noqa: E402
from resources import CompositionResource, DataStoreResource, EnvironmentSourcesResource, HuggingFaceHubResource, SandboxResource  # noqa: E402
from resources.storage import DATA_ROOT_TAG, DataStoreDuckDBResource, DataStoreJobLauncherResource, root_tag  # noqa: E402

_EXTRAS = {"celery": ("dagster_celery", "celery_executor", "dagster-celery"), "k8s": ("dagster_k8s", "k8s_job_executor", "dagster-k8s")}


def _executor_config(current: Settings) -> dict:
    raw = current.executor_config
    if not raw:
        config = {}
    else:
        text = raw
        try:
            if "\n" not in raw and Path(raw).is_file():
                text = Path(raw).read_text()
        except OSError:  # YAML text too long to be a file name
            pass
        config = yaml.safe_load(text) or {}
        if not isinstance(config, dict):
            raise ValueError(f"ENVSIM_EXECUTOR_CONFIG must be a YAML mapping (or a file holding one), got {raw!r}")
        if set(config) == {"execution"}:  # run-config form (also what `dagster-celery worker start -y` reads)
            config = (config["execution"] or {}).get("config") or {}
    if current.max_concurrent is not None:
        config["max_concurrent"] = current.max_concurrent
    return config


def executor_from_env(environ: Mapping[str, str] | None = None) -> ExecutorDefinition | None:
    """The executor ``ENVSIM_EXECUTOR`` names (None: Dagster's default, multiprocess or in-process by run
    config), from ``environ`` (default: the process environment)."""
    current = settings() if environ is None else Settings.from_env(environ)
    name = current.executor
    if name not in EXECUTORS:
        raise ValueError(f"ENVSIM_EXECUTOR={name!r} is not one of {', '.join(EXECUTORS)}")
    config = _executor_config(current)
    if "max_concurrent" in config and name not in ("multiprocess", "k8s"):
        raise ValueError(f"ENVSIM_MAX_CONCURRENT applies to the multiprocess and k8s executors, not {name!r}")
    if name == "multiprocess":
        return multiprocess_executor.configured(config, name="multiprocess") if config else None
    if name == "in_process":
        return in_process_executor.configured(config, name="in_process") if config else in_process_executor
    module, attr, package = _EXTRAS[name]
    try:
        executor = getattr(__import__(module), attr)
    except ImportError as exc:
        raise ImportError(
            f"ENVSIM_EXECUTOR={name} needs the {package} package: pip install {package} "
            f"(or pip install -e '.[{name}]' in this repository)"
        ) from exc
    return executor.configured(config, name=name) if config else executor

_modules = [environments, collection, labeling, selection, export, evaluation, simulation, envsimbench]
# GPU job assets (training / evaluation jobs) appear when a launcher backend is chosen:
# ENVSIM_LAUNCHER=local or ENVSIM_LAUNCHER=slurm (+ ENVSIM_SLURM_PARTITION, SLURM_CONF, ...).
_settings = settings()
_launcher = _settings.launcher
if _launcher:
    _modules.append(training)

_partitioned = AssetSelection.assets("trajectories", "labeled_steps")
if SHARDS is None:
    envsim_main = define_asset_job(
        "envsim_main",
        selection=AssetSelection.all() - AssetSelection.groups("training", "simulation", "envsimbench"),
        description="Build everything on the embedded default: catalog -> trajectories -> labeled steps -> strata -> "
        "benchmark split -> SFT mixture -> Hugging Face datasets, baseline simulator scores (+ checks).",
    )
    _scale_out = []
else:
    envsim_main = define_asset_job(
        "envsim_main",
        selection=AssetSelection.all() - AssetSelection.groups("training", "simulation", "envsimbench") - _partitioned,
        description="Everything unpartitioned (ENVSIM_SHARDS is set): the catalog, and on top of all partitions of the "
        "labeled steps: strata -> benchmark split -> SFT mixture -> Hugging Face datasets, baseline simulator scores (+ checks).",
    )
    _scale_out = [define_asset_job(
        "collect_and_label",
        selection=_partitioned,
        description="One partition (environment source and shard) of trajectories -> labeled steps (+ checks); "
        "backfill it to run every partition, one run each.",
    )]

#: the data root of a run: configured at launch (Launchpad, run config ``resources: store: config: data_root``)
#: and nested in the resources that keep files under it, so that they follow it
_store = DataStoreResource.configure_at_launch()

defs = Definitions(
    assets=load_assets_from_modules(_modules),
    asset_checks=load_asset_checks_from_modules(_modules),
    executor=executor_from_env(),
    jobs=[envsim_main, *_scale_out, automation.regenerate_splits, simulation.simulation, simulation.curriculum_refresh,
          define_asset_job("envsimbench_import_job", selection=AssetSelection.groups("envsimbench"),
                           description="Import the published EnvSimBench (benchmark / process data) as benchmark split versions.")] + (
        [define_asset_job("training", selection=AssetSelection.groups("training"),
                          description="SFT training and evaluation as GPU jobs through the launcher (local or Slurm).")]
        if _launcher else []
    ),
    schedules=[automation.weekly_splits],
    sensors=[automation.splits_on_new_steps, simulation.curriculum_on_new_eval],
    resources={
        "store": _store,
        "sources": EnvironmentSourcesResource(),
        "sandbox": SandboxResource(),
        "composition": CompositionResource(),
        "duckdb": DataStoreDuckDBResource(store=_store),
        "hub": HuggingFaceHubResource(),
        "launcher": DataStoreJobLauncherResource(
            store=_store,
            backend=_launcher if _launcher in ("local", "slurm") else "local",
            partition=_settings.slurm_partition,
            slurm_conf=_settings.slurm_conf,
        ),
    },
)


def print_run_timings(job_name: str = "envsim_main", since: float | None = None, data_root: str | None = None) -> bool:
    """Print where the latest run of ``job_name`` spent its time: each step (asset or check) and what
    lies outside the steps (process start-up, Dagster's orchestration) — used by ``./forge run``.
    ``since`` (epoch seconds): only a run created after it counts; ``data_root``: only a run tagged
    with that root. False when there is none."""
    from dagster import DagsterInstance, RunsFilter

    tags = {DATA_ROOT_TAG: root_tag(data_root)} if data_root else {}
    with DagsterInstance.get() as instance:
        runs = instance.get_run_records(RunsFilter(job_name=job_name, tags=tags), limit=1)
        if not runs or (since is not None and runs[0].create_timestamp.timestamp() < since):
            print(f"no run of {job_name} started" + (" by this command" if since is not None else "")
                  + f" (run history: {instance.root_directory})")
            return False
        record = runs[0]
        stats = [s for s in instance.get_run_step_stats(record.dagster_run.run_id) if s.start_time and s.end_time]
        if not stats or not record.start_time or not record.end_time:
            return True
        total = record.end_time - record.start_time
        print(f"Run {record.dagster_run.run_id[:8]} of {job_name}: {total:.1f}s wall "
              f"({record.dagster_run.status.value}); time per step:")
        busy = 0.0
        for s in sorted(stats, key=lambda s: s.start_time):
            seconds = s.end_time - s.start_time
            busy += seconds
            print(f"  {s.step_key:45s} {seconds:7.1f}s")
        print(f"  {'(sum of steps; they run concurrently)':45s} {busy:7.1f}s")
        print(f"  {'(run wall time outside any step)':45s} "
              f"{total - (max(s.end_time for s in stats) - min(s.start_time for s in stats)):7.1f}s")
        return True


def _merge(base: dict, over: dict) -> dict:
    """``over`` merged into ``base`` (mappings merged key by key, anything else replaced)."""
    out = dict(base)
    for key, value in over.items():
        out[key] = _merge(out[key], value) if isinstance(out.get(key), dict) and isinstance(value, dict) else value
    return out


def _describe_config_error(error, job) -> str:  # noqa: ANN001 (dagster's EvaluationError)
    from difflib import get_close_matches

    from dagster._config.errors import DagsterEvaluationErrorReason

    path = [str(getattr(e, "field_name", getattr(e, "list_index", "?"))) for e in error.stack.entries]
    where = ".".join(path) or "the top level"
    if error.reason == DagsterEvaluationErrorReason.FIELD_NOT_DEFINED:
        name = error.error_data.field_name
        keys = _schema_keys(job, path)
        close = get_close_matches(name, keys, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        return (f"unknown config key {name!r} under {where}: {hint}"
                f"{'valid keys: ' + ', '.join(keys) if keys else 'remove it'}")
    if error.reason == DagsterEvaluationErrorReason.FIELDS_NOT_DEFINED:
        keys = _schema_keys(job, path)
        return (f"unknown config keys {', '.join(map(repr, error.error_data.field_names))} under {where}: "
                f"valid keys: {', '.join(keys)}")
    if error.reason == DagsterEvaluationErrorReason.RUNTIME_TYPE_MISMATCH:
        return (f"config value {error.error_data.value_rep} at {where} has the wrong type "
                f"(expected {error.error_data.config_type_snap.given_name or error.error_data.config_type_snap.key}): fix the value")
    if error.reason == DagsterEvaluationErrorReason.MISSING_REQUIRED_FIELD:
        return f"config key {error.error_data.field_name!r} is required under {where}: add it"
    return f"config error at {where}: {error.message.splitlines()[0][:300]}"


def _schema_keys(job, path: list[str]) -> list[str]:  # noqa: ANN001
    """Field names the job's run config accepts at ``path`` (empty when it is not a mapping)."""
    config_type = job.run_config_schema.config_type
    for name in path:
        fields = getattr(config_type, "fields", None)
        if not fields or name not in fields:
            return []
        config_type = fields[name].config_type
    return sorted(getattr(config_type, "fields", {}) or {})


def check_launch(argv: list[str]) -> list[str]:
    """What is wrong with a ``dg launch`` command line (``--job``, ``-c/--config``, ``--config-json``)
    before any run starts: one line each, naming the file, key or job and what to do. Empty: launch."""
    import argparse
    import json

    from dagster import DagsterInvalidConfigError, validate_run_config

    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--job")
    parser.add_argument("--assets")
    parser.add_argument("-c", "--config", action="append", default=[])
    parser.add_argument("--config-json")
    args, _rest = parser.parse_known_args(argv)
    problems: list[str] = []
    run_config: dict = {}
    for name in reversed(args.config):  # dg launch: files listed first take precedence
        path = Path(name)
        if not path.is_file():
            problems.append(f"run config file {name} does not exist: pass an existing YAML file to -c/--config")
            continue
        try:
            loaded = yaml.safe_load(path.read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            problems.append(f"run config file {name} is not valid YAML ({str(exc).splitlines()[0]}): fix the file")
            continue
        if not isinstance(loaded, dict):
            problems.append(f"run config file {name} holds a {type(loaded).__name__}, not a mapping: "
                            "write ops:/resources: keys at its top level")
            continue
        run_config = _merge(run_config, loaded)
    if args.config_json:
        try:
            loaded = json.loads(args.config_json)
            if not isinstance(loaded, dict):
                raise ValueError("not a JSON object")
            run_config = _merge(run_config, loaded)
        except ValueError as exc:
            problems.append(f"--config-json is not a JSON object ({exc}): pass e.g. '{{\"ops\": {{}}}}'")
    if problems or not args.job:
        return problems
    jobs = sorted(job.name for job in defs.resolve_all_job_defs() if not job.name.startswith("__"))
    if args.job not in jobs:
        return [f"there is no job {args.job!r} in this code location: choose one of {', '.join(jobs)}"]
    job = defs.resolve_job_def(args.job)
    try:
        validate_run_config(job, run_config)
    except DagsterInvalidConfigError as exc:
        where = " and ".join(args.config + (["--config-json"] if args.config_json else [])) or "run config"
        problems += [f"{where}: {_describe_config_error(error, job)}" for error in exc.errors]
        return problems
    # the files the sources name: a missing one is a one-line error now, not a failed step later
    sources_config = ((run_config.get("resources") or {}).get("sources") or {}).get("config") or {}
    try:
        check_files(EnvironmentSourcesResource(**sources_config).config())
    except SourceError as exc:
        problems += str(exc).split("; ")
    except Exception:  # noqa: BLE001 - a config only the run can resolve (an env var...): the run reports it
        pass
    return problems


if __name__ == "__main__":  # ``python -m pipeline.definitions check-launch ARGS``: what ./forge run checks first
    import sys

    if sys.argv[1:2] != ["check-launch"]:
        sys.exit("usage: python -m pipeline.definitions check-launch [dg launch arguments]")
    found = check_launch(sys.argv[2:])
    for line in found:
        print(f"./forge run: {line}", file=sys.stderr)
    sys.exit(2 if found else 0)
