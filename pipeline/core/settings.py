"""Every ``ENVSIM_*`` setting, read from the environment in one place (README "Settings" lists them).

``settings()`` is the one reader the code uses: it parses the environment once and parses it again only
when one of the variables changed (tests that ``monkeypatch.setenv`` see their value, nothing re-parses
on an unchanged environment). ``Settings.from_env(mapping)`` parses any mapping (a test's dict).

An empty variable counts as unset. A value that does not parse raises ``SettingsError`` naming the
variable. Choices (``ENVSIM_EXECUTOR``, ``ENVSIM_SANDBOX``, ``ENVSIM_PROFILE``) are checked by the code
that defines them (``pipeline.definitions``, ``pipeline.execution.isolation``, ``pipeline.core.profile``).

``prepare_process()`` is the process-wide setup the entry points (``python -m pipeline``, the Dagster
code location ``pipeline.definitions``) run first, before pyarrow is imported: it asks for Arrow's
jemalloc pool (``pipeline.store.memory``); importing ``pipeline`` itself changes nothing.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping


class SettingsError(ValueError):
    """An ``ENVSIM_*`` variable whose value cannot be used."""


#: every variable ``Settings`` reads (``SLURM_CONF`` is Slurm's own)
VARIABLES = (
    "ENVSIM_DATA_ROOT", "ENVSIM_PROFILE", "ENVSIM_SHARDS", "ENVSIM_EXECUTOR", "ENVSIM_EXECUTOR_CONFIG",
    "ENVSIM_MAX_CONCURRENT", "ENVSIM_LAUNCHER", "ENVSIM_SLURM_PARTITION", "SLURM_CONF", "ENVSIM_SANDBOX",
    "ENVSIM_SANDBOX_WORKERS", "ENVSIM_LLAMAFACTORY_PYTHON", "ENVSIM_SERVE_PYTHON", "ENVSIM_DUCKDB_MEMORY", "ENVSIM_DUCKDB_THREADS",
    "ENVSIM_SPLIT_CRON", "ENVSIM_STRICT",
)


#: the values ``ENVSIM_EXECUTOR`` takes (the executors ``pipeline.definitions`` builds)
EXECUTORS = ("multiprocess", "in_process", "celery", "k8s")


@dataclass(frozen=True)
class Settings:
    #: ``ENVSIM_DATA_ROOT``: the data root (default ``./data``); the ``store`` resource's default
    data_root: Path = Path("data")
    #: ``ENVSIM_PROFILE``: ``default`` or ``small`` (``pipeline.core.profile``)
    profile: str = "default"
    #: ``ENVSIM_SHARDS``: shards per environment source (None: collection and labeling unpartitioned)
    shards: int | None = None
    #: ``ENVSIM_EXECUTOR``: ``multiprocess``, ``in_process``, ``celery`` or ``k8s`` (lower-cased)
    executor: str = "multiprocess"
    #: ``ENVSIM_EXECUTOR_CONFIG``: the executor's config, YAML text or a file holding it
    executor_config: str | None = None
    #: ``ENVSIM_MAX_CONCURRENT``: at most this many steps of a run at once
    max_concurrent: int | None = None
    #: ``ENVSIM_LAUNCHER``: ``local`` or ``slurm``; set, the ``training`` group appears
    launcher: str | None = None
    #: ``ENVSIM_SLURM_PARTITION``: the Slurm partition GPU jobs go to
    slurm_partition: str | None = None
    #: ``SLURM_CONF``: the Slurm client configuration
    slurm_conf: str | None = None
    #: ``ENVSIM_SANDBOX``: ``bwrap`` or ``trusted``
    sandbox: str = "bwrap"
    #: ``ENVSIM_SANDBOX_WORKERS``: the ``sandbox`` resource's workers (None: the CPU count)
    sandbox_workers: int | None = None
    #: ``ENVSIM_LLAMAFACTORY_PYTHON``: Python of the LLaMA-Factory environment
    llamafactory_python: str | None = None
    #: ``ENVSIM_SERVE_PYTHON``: Python of a separate serving environment (vLLM; ``./forge serve-env``)
    serve_python: str | None = None
    #: ``ENVSIM_DUCKDB_MEMORY``: DuckDB's memory limit per connection
    duckdb_memory: str = "512MB"
    #: ``ENVSIM_DUCKDB_THREADS``: DuckDB's threads (None: all cores)
    duckdb_threads: int | None = None
    #: ``ENVSIM_SPLIT_CRON``: the weekly split regeneration schedule (UTC)
    split_cron: str = "0 4 * * 1"
    #: ``ENVSIM_STRICT``: a quarantined environment (non-deterministic or unverified labels) fails the run
    #: instead of being excluded while the others go on (``1``/``true``/``yes``/``on`` or ``0``/``false``/``no``/``off``)
    strict: bool = False

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> "Settings":
        """The settings ``environ`` (default: the process environment) gives."""
        env = os.environ if environ is None else environ
        return _parse(tuple(env.get(name) for name in VARIABLES))


def _parse(values: tuple[str | None, ...]) -> Settings:
    raw = {name: (value or "").strip() or None for name, value in zip(VARIABLES, values)}

    def whole(name: str, minimum: int) -> int | None:
        text = raw[name]
        if text is None:
            return None
        try:
            number = int(text)
        except ValueError:
            number = None
        if number is None or number < minimum:
            raise SettingsError(f"{name} must be a whole number >= {minimum}, got {text!r}")
        return number

    def flag(name: str) -> bool | None:
        text = raw[name]
        if text is None:
            return None
        if text.lower() in ("1", "true", "yes", "on"):
            return True
        if text.lower() in ("0", "false", "no", "off"):
            return False
        raise SettingsError(f"{name} must be 1/true/yes/on or 0/false/no/off, got {text!r}")

    default = Settings()
    strict = flag("ENVSIM_STRICT")
    return Settings(
        data_root=Path(raw["ENVSIM_DATA_ROOT"] or default.data_root),
        profile=raw["ENVSIM_PROFILE"] or default.profile,
        shards=whole("ENVSIM_SHARDS", 1),
        executor=(raw["ENVSIM_EXECUTOR"] or default.executor).lower(),
        executor_config=raw["ENVSIM_EXECUTOR_CONFIG"],
        max_concurrent=whole("ENVSIM_MAX_CONCURRENT", 0),
        launcher=raw["ENVSIM_LAUNCHER"],
        slurm_partition=raw["ENVSIM_SLURM_PARTITION"],
        slurm_conf=raw["SLURM_CONF"],
        sandbox=raw["ENVSIM_SANDBOX"] or default.sandbox,
        sandbox_workers=whole("ENVSIM_SANDBOX_WORKERS", 1),
        llamafactory_python=raw["ENVSIM_LLAMAFACTORY_PYTHON"],
        serve_python=raw["ENVSIM_SERVE_PYTHON"],
        duckdb_memory=raw["ENVSIM_DUCKDB_MEMORY"] or default.duckdb_memory,
        duckdb_threads=whole("ENVSIM_DUCKDB_THREADS", 0) or None,
        split_cron=raw["ENVSIM_SPLIT_CRON"] or default.split_cron,
        strict=default.strict if strict is None else strict,
    )


_parse_cached = functools.lru_cache(maxsize=16)(_parse)


def settings() -> Settings:
    """The settings of the process environment as it is now (parsed once per distinct environment)."""
    return _parse_cached(tuple(os.environ.get(name) for name in VARIABLES))


def prepare_process() -> None:
    """What an entry point does first, before pyarrow is imported: Arrow's default memory pool is
    jemalloc (``pipeline.store.memory`` then purges it at once, which bounds the peak memory of the
    streaming stages). An explicit ``ARROW_DEFAULT_MEMORY_POOL`` wins."""
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "jemalloc")
