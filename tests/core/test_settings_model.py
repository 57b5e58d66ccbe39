"""The settings model is the one definition: each field has its variable, a row in the settings table
showing its default, a plain-value constructor that reads no environment, and one-line errors."""

from __future__ import annotations

import re
from pathlib import Path

import pydantic
import pytest

from pipeline.core.settings import OTHER_VARIABLES, VARIABLES, Settings, SettingsError, unknown_variables, variable

ROOT = Path(__file__).resolve().parents[2]


def _table() -> dict[str, str]:
    """variable -> its default column, from the settings table of docs/settings.md."""
    section = (ROOT / "docs" / "settings.md").read_text().split("\n## Settings\n", 1)[1].split("\n## ", 1)[0]
    return {m[0]: m[1] for m in re.findall(r"^\| `([A-Z_]+)` \| ([^|]*) \|", section, flags=re.M)}


def test_every_field_has_a_row_showing_its_default():
    table = _table()
    assert list(VARIABLES) == [variable(f) for f in Settings.model_fields] and "SLURM_CONF" in VARIABLES
    for field, info in Settings.model_fields.items():
        row = table[variable(field)]
        if info.default is not None:
            assert str(info.default).lower() in row.lower(), (field, info.default, row)


def test_every_variable_the_table_lists_is_known_and_a_misspelt_one_is_named_with_the_nearest():
    assert set(_table()) - {"ARROW_DEFAULT_MEMORY_POOL"} == {*VARIABLES, *OTHER_VARIABLES}
    # the misspelt names in two pieces: tests/core/test_settings.py holds every whole ENVSIM_ name to the table
    workers, other = "ENVSIM_" + "SANDBOXWORKERS", "ENVSIM_" + "X"
    environ = {"ENVSIM_PROFILE": "small", "ENVSIM_RECORD_DURATIONS": "1", workers: "2", other: ""}
    assert unknown_variables(environ | {"HOME": "/root"}) == [
        f"{workers} is not a setting: did you mean ENVSIM_SANDBOX_WORKERS? rename or unset it "
        "(docs/settings.md lists every variable)",
        f"{other} is not a setting: rename or unset it (docs/settings.md lists every variable)",
    ]
    assert unknown_variables({"ENVSIM_DATA_ROOT": "/srv", "ENVSIM_FROZEN_TIME": "0"}) == []


def test_a_plain_value_reads_no_environment(monkeypatch):
    monkeypatch.setenv("ENVSIM_DUCKDB_MEMORY", "9GB")
    value = Settings(profile="small", data_root="/srv/envsim")
    assert (value.profile, value.data_root, value.duckdb_memory) == ("small", Path("/srv/envsim"), "512MB")
    assert value == Settings(profile="small", data_root=Path("/srv/envsim")) and hash(value) == hash(
        Settings(profile="small", data_root="/srv/envsim")
    )
    with pytest.raises(pydantic.ValidationError, match="frozen"):
        value.profile = "default"
    assert (
        Settings.from_env({"ENVSIM_PROFILE": " small ", "ENVSIM_DATA_ROOT": "/srv/envsim", "ENVSIM_SHARDS": ""})
        == value
    )


@pytest.mark.parametrize(
    "name, bad, takes",
    [
        ("ENVSIM_SHARDS", "0", "a whole number >= 1"),
        ("ENVSIM_DUCKDB_THREADS", "many", "a whole number >= 0"),
        ("ENVSIM_STRICT", "maybe", "1/true/yes/on or 0/false/no/off"),
        (
            "ENVSIM_SPLIT_CRON",
            "every monday",
            "a cron schedule of 5 fields, minute hour day-of-month month day-of-week (UTC), e.g. '0 4 * * 1'",
        ),
    ],
)
def test_a_bad_value_fails_in_one_line_naming_the_variable_and_what_it_takes(name, bad, takes):
    with pytest.raises(SettingsError) as info:
        Settings.from_env({name: bad})
    assert str(info.value) == f"{name} must be {takes}, got {bad!r}"


@pytest.mark.parametrize(
    "cron",
    [
        "0 4 * * 1",
        "*/15 * * * *",
        "0 4 * * mon-fri",
        "0 0 1 jan *",
        "0 0 29 2 *",
        "0 0 L * *",
        "0 0 * * 5#3",
        "0 0 ? * *",
        "@daily",
        "@weekly",
        "0 0 * * 7",
        "1-5/2 * * * *",
        "0 0 30,31 2 *",
        "every monday",
        "",
        "0 4 * *",
        "0 4 * * 1 2",
        "0 0 * * * *",
        "60 * * * *",
        "0 24 * * *",
        "0 0 0 * *",
        "0 0 * 13 *",
        "0 0 * * 8",
        "0 0 30 2 *",
        "0 0 31 2 *",
        "0 0 * * 5L",
        "0 0 15W * *",
        "@reboot",
        "H 4 * * 1",
    ],
)
def test_the_schedule_setting_accepts_what_dagster_schedules(cron):
    """``ENVSIM_SPLIT_CRON`` is refused with the settings exactly when Dagster would refuse the schedule built from
    it (``weekly_splits``), so a bad value is one line before anything starts, never a definition error later."""
    from dagster._utils.schedules import is_valid_cron_string

    from pipeline.core.settings import cron_schedule

    try:
        cron_schedule(cron)
        ours = True
    except ValueError:
        ours = False
    assert ours == is_valid_cron_string(cron), cron


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        ("ENVSIM_LAUNCHER", "lsf", "ENVSIM_LAUNCHER must be one of local, slurm, got 'lsf'"),
        ("ENVSIM_SANDBOX", "docker", "ENVSIM_SANDBOX must be one of bwrap, trusted, got 'docker'"),
        ("ENVSIM_EXECUTOR", "spark", "ENVSIM_EXECUTOR must be one of multiprocess, in_process, celery, k8s, got"),
        ("ENVSIM_PROFILE", "medium", "ENVSIM_PROFILE must be a profile (default, small) or the path of a profile"),
    ],
)
def test_a_setting_with_a_fixed_set_of_values_is_checked_by_the_model(variable, value, says):
    """A choice is a ``Literal`` of ``Settings`` (a profile: a file): an unknown one fails where it is read, naming
    the choices — never silently the default (an unknown launcher was ``local`` before)."""
    with pytest.raises(SettingsError) as err:
        Settings.from_env({variable: value})
    assert str(err.value).startswith(says), str(err.value)
    assert Settings.from_env({"ENVSIM_EXECUTOR": "IN_PROCESS"}).executor == "in_process"
