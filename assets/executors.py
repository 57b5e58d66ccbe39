"""The executor the settings choose (``Settings.executor``, ``executor_config``, ``max_concurrent``)."""

from contextlib import suppress
from pathlib import Path

import yaml
from dagster import ExecutorDefinition, in_process_executor, multi_or_in_process_executor, multiprocess_executor

from pipeline.core.settings import Settings

#: executors from optional packages: name -> (module, attribute, package)
_EXTRAS = {
    "celery": ("dagster_celery", "celery_executor", "dagster-celery"),
    "k8s": ("dagster_k8s", "k8s_job_executor", "dagster-k8s"),
}


#: how a multiprocess run starts its steps unless its config names a ``start_method``: forked from one server that
#: imported Dagster, the definitions and the instance's storage once, not Dagster's ``spawn`` (an interpreter per step
#: importing them again): about a third of the CPU (docs/performance.md, "Runs in the UI and the daemon")
FORKSERVER = {
    "forkserver": {
        "preload_modules": [
            "assets.definitions",
            "dagster._core.storage.sqlite_storage",
            "dagster._core.storage.local_compute_log_manager",
        ]
    }
}


def _forkserver(multiprocess: dict) -> dict:
    """A multiprocess executor's config, started from :data:`FORKSERVER` unless it names its own start method."""
    return multiprocess if multiprocess.get("start_method") else {**multiprocess, "start_method": FORKSERVER}


def _default(config: dict) -> dict:
    """Dagster's default executor's config (``multiprocess`` or ``in_process``), the multiprocess one forked."""
    return {"multiprocess": _forkserver(config["multiprocess"] or {})} if "multiprocess" in config else config


#: Dagster's default executor (multiprocess, or in-process by run config: ``execution: {config: {in_process: {}}}``)
#: with its steps forked (:data:`FORKSERVER`)
DEFAULT = multi_or_in_process_executor.configured(_default, config_schema=multi_or_in_process_executor.config_field)


def _executor_config(current: Settings) -> dict:
    raw = current.executor_config
    config = {}
    if raw:
        text = raw
        with suppress(OSError):  # YAML text too long to be a file name
            if "\n" not in raw and Path(raw).is_file():
                text = Path(raw).read_text()
        config = yaml.safe_load(text) or {}
        if not isinstance(config, dict):
            raise ValueError(f"ENVSIM_EXECUTOR_CONFIG must be a YAML mapping (or a file holding one), got {raw!r}")
        if set(config) == {"execution"}:  # run-config form (also what `dagster-celery worker start -y` reads)
            config = (config["execution"] or {}).get("config") or {}
    if current.max_concurrent is not None:
        config["max_concurrent"] = current.max_concurrent
    return config


def executor_for(current: Settings) -> ExecutorDefinition:
    """The executor ``current.executor`` names (multiprocess unconfigured: :data:`DEFAULT`)."""
    name = current.executor  # a Literal of Settings (``Executor``)
    config = _executor_config(current)
    if "max_concurrent" in config and name not in ("multiprocess", "k8s"):
        raise ValueError(f"ENVSIM_MAX_CONCURRENT applies to the multiprocess and k8s executors, not {name!r}")
    if name == "multiprocess":
        return multiprocess_executor.configured(_forkserver(config), name="multiprocess") if config else DEFAULT
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
