"""The settings model is the one definition: each field has its variable, a row in the settings table
showing its default, a plain-value constructor that reads no environment, and one-line errors."""

from __future__ import annotations

import re
from pathlib import Path

import pydantic
import pytest

from pipeline.core.settings import VARIABLES, Settings, SettingsError, variable

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
    ],
)
def test_a_bad_value_fails_in_one_line_naming_the_variable_and_what_it_takes(name, bad, takes):
    with pytest.raises(SettingsError) as info:
        Settings.from_env({name: bad})
    assert str(info.value) == f"{name} must be {takes}, got {bad!r}"
