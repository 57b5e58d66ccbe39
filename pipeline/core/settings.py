"""Every ``ENVSIM_*`` setting, declared once as a frozen pydantic model (docs/settings.md). ``settings()`` parses
the process environment and is read by the entry points only, which pass the value down; ``Settings.from_env``
parses any mapping; ``Settings(...)`` reads no environment. A value that does not parse is a ``SettingsError``
naming the variable, what it takes and the value given.
"""

from __future__ import annotations

import difflib
import functools
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Literal, get_args

from croniter import croniter
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from pipeline.core import profile as profiles


class SettingsError(ValueError):
    """An ``ENVSIM_*`` variable whose value cannot be used."""


Executor = Literal["multiprocess", "in_process", "celery", "k8s"]

_PREFIX = "ENVSIM_"
_OWN_NAMES = {"slurm_conf": "SLURM_CONF"}  # fields read from a variable of another program
_FLAG = "1/true/yes/on or 0/false/no/off"
_CRON = "a cron schedule of 5 fields, minute hour day-of-month month day-of-week (UTC), e.g. '0 4 * * 1'"


def cron_schedule(value: str) -> str:
    """``value`` if Dagster can schedule it, else ``ValueError``: what Dagster's own check accepts (exactly 5 fields,
    never the 30th or 31st of February, no ``W`` day), so a schedule built from it never fails to load."""
    parts = value.split()
    try:
        valid = croniter.is_valid(value) and not (len(parts) == 5 and "w" in parts[2].lower())
        fields = croniter.expand(value)[0] if valid else []
    except (ValueError, KeyError, TypeError):  # croniter's parse errors on what is_valid let through
        fields = []
    if len(fields) != 5 or (fields[3] == [2] and len(fields[2]) == 1 and fields[2][0] in (30, 31)):
        raise ValueError(f"not {_CRON}")
    return value


class Settings(BaseModel):
    """The pipeline's settings (a frozen value; see the module docstring for the three constructors)."""

    model_config = ConfigDict(frozen=True, extra="forbid", str_strip_whitespace=True)

    data_root: Path = Field(Path("data"), description="the data root; the `store` resource's default")
    profile: Annotated[str, AfterValidator(profiles.check)] = Field(
        "default", description="a profile of `pipeline/profiles/` (`default`, `small`) or a profile file's path"
    )
    shards: int | None = Field(None, ge=1, description="shards per environment source (unset: unpartitioned)")
    executor: Annotated[Executor, BeforeValidator(str.lower)] = Field(
        "multiprocess", description="`multiprocess`, `in_process`, `celery` or `k8s` (lower-cased)"
    )
    executor_config: str | None = Field(None, description="the executor's config, YAML text or a file holding it")
    max_concurrent: int | None = Field(None, ge=0, description="at most this many steps of a run at once")
    parallel_runs: int | None = Field(
        None, ge=1, description="`./forge run` only: partition runs side by side (unset: the CPU count)"
    )
    launcher: Literal["local", "slurm"] | None = Field(
        None, description="`local` or `slurm`; set, the `training` group appears"
    )
    slurm_partition: str | None = Field(None, description="the Slurm partition GPU jobs go to")
    slurm_conf: str | None = Field(None, description="the Slurm client configuration (Slurm's own variable)")
    sandbox: Literal["bwrap", "trusted"] = Field("bwrap", description="`bwrap` or `trusted`")
    sandbox_workers: int | None = Field(
        None, ge=1, description="the `sandbox` resource's workers (unset: the CPU count)"
    )
    llamafactory_python: str | None = Field(None, description="Python of the LLaMA-Factory environment")
    serve_python: str | None = Field(None, description="Python of a separate serving environment (vLLM)")
    duckdb_memory: str = Field("512MB", description="DuckDB's memory limit per connection")
    duckdb_threads: Annotated[int | None, AfterValidator(lambda n: n or None)] = Field(
        None, ge=0, description="DuckDB's threads (unset or 0: all cores)"
    )
    split_cron: Annotated[str, AfterValidator(cron_schedule)] = Field(
        "0 4 * * 1", description="the weekly split regeneration schedule (UTC; a 5-field cron schedule)"
    )
    strict: bool = Field(
        False,
        description=f"a quarantined environment, or a benchmark cell the corpus cannot fill, fails the run ({_FLAG})",
    )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """The settings ``environ`` (default: the process environment) gives."""
        env = os.environ if environ is None else environ
        return _parse(tuple(env.get(name) for name in VARIABLES))


def variable(field: str) -> str:
    """The environment variable of a :class:`Settings` field."""
    return _OWN_NAMES.get(field) or _PREFIX + field.upper()


#: every variable ``Settings`` reads, in field order
VARIABLES = tuple(variable(field) for field in Settings.model_fields)


#: the ``ENVSIM_*`` variables read outside :class:`Settings` (each has its row in docs/settings.md too): ``./forge
#: train-env``'s torch pin, what the sandbox sets in its children, and the tests' own
OTHER_VARIABLES = (
    "ENVSIM_TRAIN_TORCH",
    "ENVSIM_FROZEN_TIME",
    "ENVSIM_CPUS",
    "ENVSIM_UPDATE_DOCS",
    "ENVSIM_UI_SCREENSHOTS",
    "ENVSIM_RECORD_DURATIONS",
)


def unknown_variables(environ: Mapping[str, str] | None = None) -> list[str]:
    """One line per ``ENVSIM_*`` variable of ``environ`` (default: the process environment) that nothing reads — a
    misspelt setting would otherwise be ignored without a word —, naming the nearest known variable."""
    env = os.environ if environ is None else environ
    known = (*VARIABLES, *OTHER_VARIABLES)
    lines = []
    for name in sorted(n for n in env if n.startswith(_PREFIX) and n not in known):
        near = difflib.get_close_matches(name, known, n=1, cutoff=0.75)
        hint = f"did you mean {near[0]}? " if near else ""
        lines.append(f"{name} is not a setting: {hint}rename or unset it (docs/settings.md lists every variable)")
    return lines


def _takes(field: str) -> str:
    """What the variable of ``field`` takes, for an error message."""
    info = Settings.model_fields[field]
    if info.annotation is bool:
        return _FLAG
    if field == "split_cron":
        return _CRON
    if field == "profile":
        return f"a profile ({', '.join(profiles.available())}) or the path of a profile's .toml file"
    choices = [a for a in get_args(info.annotation) if a is not type(None)]
    if choices and all(isinstance(c, str) for c in get_args(choices[0]) or choices):
        return "one of " + ", ".join(v for c in choices for v in (get_args(c) or (c,)))
    minimum = next((m.ge for m in info.metadata if hasattr(m, "ge")), None)
    return "a whole number" + (f" >= {minimum}" if minimum is not None else "")


def _parse(values: tuple[str | None, ...]) -> Settings:
    given = {field: value for field, value in zip(Settings.model_fields, values) if value and value.strip()}
    try:
        return Settings(**given)
    except ValidationError as exc:
        field = str(exc.errors()[0]["loc"][0])
        raise SettingsError(f"{variable(field)} must be {_takes(field)}, got {given[field]!r}") from None


_parse_cached = functools.lru_cache(maxsize=16)(_parse)


def settings() -> Settings:
    """The settings of the process environment as it is now (parsed once per distinct environment)."""
    return _parse_cached(tuple(os.environ.get(name) for name in VARIABLES))


def prepare_process() -> None:
    """What an entry point does first, before pyarrow is imported: jemalloc as Arrow's default pool
    (:mod:`pipeline.store.memory`), unless ``ARROW_DEFAULT_MEMORY_POOL`` says otherwise."""
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "jemalloc")
