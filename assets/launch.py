"""Before and after a launch (what ``./forge run`` calls): ``check-launch`` validates a ``dg launch`` command
line against the code location before any run starts, ``timings`` prints where the latest run spent its time.

``python -m assets.launch check-launch --job envsim_main [-c FILE]... [--config-json JSON]``
``python -m assets.launch timings [--job envsim_main] [--since EPOCH] [--data-root DIR]``
"""

from pipeline.core.settings import prepare_process

prepare_process()  # first, before anything imports pyarrow

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import yaml  # noqa: E402
from dagster import DagsterInstance, DagsterInvalidConfigError, Definitions, RunsFilter, validate_run_config  # noqa: E402

from assets.definitions import build_definitions  # noqa: E402
from pipeline.collect.sources import SourceError, check_files  # noqa: E402
from pipeline.core.settings import settings  # noqa: E402
from pipeline.store.layout import DataLayout  # noqa: E402
from resources import EnvironmentSourcesResource  # noqa: E402
from resources.storage import DATA_ROOT_TAG, root_tag  # noqa: E402


def print_run_timings(job_name: str = "envsim_main", since: float | None = None, data_root: str | None = None) -> bool:
    """Print where the latest run of ``job_name`` spent its time: each step (asset or check) and what
    lies outside the steps (process start-up, Dagster's orchestration) — used by ``./forge run``.
    ``since`` (epoch seconds): only a run created after it counts; ``data_root``: only a run tagged
    with that root. False when there is none."""
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
        choices = [v.value for v in error.error_data.config_type_snap.enum_values or []]
        if choices:  # a closed choice (a config enum): name them
            return f"config value {error.error_data.value_rep} at {where} is not one of {', '.join(choices)}: fix the value"
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


def check_launch(argv: list[str], defs: Definitions | None = None) -> list[str]:
    """What is wrong with a ``dg launch`` command line (``--job``, ``-c/--config``, ``--config-json``)
    before any run starts, against ``defs`` (default: the code location of the process's settings): one
    line each, naming the file, key or job and what to do. Empty: launch."""

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
    defs = defs if defs is not None else build_definitions(settings())
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
    resources = run_config.get("resources") or {}
    sources_config = (resources.get("sources") or {}).get("config") or {}
    data_root = ((resources.get("store") or {}).get("config") or {}).get("data_root") or settings().data_root
    try:
        check_files(EnvironmentSourcesResource(**sources_config).config(DataLayout.at(data_root)))
    except SourceError as exc:
        problems += str(exc).split("; ")
    except Exception:  # noqa: BLE001 - a config only the run can resolve (an env var...): the run reports it
        pass
    return problems


def main(argv: list[str]) -> int:
    """``check-launch [dg launch arguments]``: exit 2 with one line per problem (what ./forge run checks
    first); ``timings [--job J] [--since EPOCH] [--data-root DIR]``: the latest run's step timings (exit 3: none)."""
    if argv[:1] == ["check-launch"]:
        found = check_launch(argv[1:])
        for line in found:
            print(f"./forge run: {line}", file=sys.stderr)
        return 2 if found else 0
    if argv[:1] == ["timings"]:
        parser = argparse.ArgumentParser(prog="python -m assets.launch timings")
        parser.add_argument("--job", default="envsim_main")
        parser.add_argument("--since", type=float)
        parser.add_argument("--data-root")
        args = parser.parse_args(argv[1:])
        return 0 if print_run_timings(args.job, since=args.since, data_root=args.data_root) else 3
    print("usage: python -m assets.launch check-launch [dg launch arguments] | timings [--job J] [--since EPOCH] [--data-root DIR]",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
