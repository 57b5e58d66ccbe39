"""The one CLI (``assets/cli.py``, what ``./forge`` hands every command to): its usage names every command it
has, a mistake is one line, help needs nothing but the standard library, and what a command's processes share
(the absolute data root, one run history per data root with the project's ``dagster.yaml``) is set once here."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from assets import cli

ROOT = Path(__file__).resolve().parents[2]


def test_the_usage_lists_every_command_and_only_those(capsys):
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    listed = {line.split()[0] for line in out.splitlines() if line.startswith("  ") and not line.startswith("   ")}
    assert listed == set(cli.COMMANDS)
    for word in ("-c/--config", "--config-json", "ENVSIM_DATA_ROOT", "files listed first win"):
        assert word in out


def test_an_unknown_command_and_a_set_up_command_are_one_line(capsys):
    assert cli.main(["frobnicate"]) == 2
    assert capsys.readouterr().err == "./forge: unknown command 'frobnicate': run ./forge --help for the commands\n"
    assert cli.main(["train-env"]) == 2
    assert capsys.readouterr().err == "./forge train-env builds an environment: run it as ./forge train-env\n"
    assert cli.main(["train-env", "-h"]) == 0 and "usage: ./forge COMMAND" in capsys.readouterr().out


@pytest.mark.parametrize("command", sorted(cli.COMMANDS))
def test_help_without_the_project_environment_imports_nothing_of_it(command):
    """The machine's python3 in a tree without .venv: no Dagster, no pyarrow; ``COMMAND -h`` still prints a usage
    and exits 0 (``run -h`` its own options), and imports nothing of the project's dependencies."""
    code = (
        "import sys; sys.modules['dagster'] = None\n"
        "from assets.cli import main\n"
        f"code = main([{command!r}, '-h'])\n"
        "assert not {'pyarrow', 'pydantic', 'pipeline.core.settings'} & set(sys.modules), sorted(sys.modules)\n"
        "sys.exit(code)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "usage" in proc.stdout.lower() and "Traceback" not in proc.stderr
    if command == "run":
        assert "--config-json JSON" in proc.stdout and "-c FILE, --config FILE" in proc.stdout
    elif command not in ("train-env", "serve-env", "setup"):
        assert f"./forge setup first, then ./forge {command} -h" in proc.stdout


def test_the_environment_of_a_command_is_set_once(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ENVSIM_DATA_ROOT", "rel/data")
    monkeypatch.setenv("DAGSTER_HOME", "")  # unset (and restored after the test)
    monkeypatch.setenv("ENVSIM_EXECUTOR", "")
    root = cli._prepare_environment(executor="in_process")
    assert root == tmp_path / "rel" / "data" and os.environ["ENVSIM_DATA_ROOT"] == str(root)
    assert os.environ["DAGSTER_HOME"] == str(root / ".dagster_home") and os.environ["ENVSIM_EXECUTOR"] == "in_process"
    assert (root / ".dagster_home" / "dagster.yaml").read_text() == (ROOT / "dagster.yaml").read_text()
    # a chosen executor and home stay; a home set up before python_logs gets it once
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    monkeypatch.setenv("ENVSIM_EXECUTOR", "multiprocess")
    cli._prepare_environment(executor="in_process")
    cli._prepare_environment(executor="in_process")
    assert os.environ["ENVSIM_EXECUTOR"] == "multiprocess" and os.environ["DAGSTER_HOME"] == str(home)
    assert (home / "dagster.yaml").read_text() == (
        "telemetry:\n  enabled: false\npython_logs:\n  python_log_level: INFO\n"
    )


def test_a_run_config_error_writes_nothing(tmp_path, monkeypatch, capsys):
    """``./forge run`` with a config it cannot use: one line, exit 2, and no data root or run history was made
    (``DAGSTER_HOME`` unset: it would be under the data root)."""
    monkeypatch.setenv("ENVSIM_DATA_ROOT", str(tmp_path / "data"))
    monkeypatch.setenv("DAGSTER_HOME", "")
    monkeypatch.setenv("ENVSIM_EXECUTOR", "")
    assert cli.main(["run", "--config-json", '{"ops": {"benchmark_split": {"config": {"seeed": 1}}}}']) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(
        "./forge run: --config-json: unknown config key 'seeed' under ops.benchmark_split.config: did you mean 'seed'?"
    )
    assert not (tmp_path / "data").exists()


def test_the_run_config_is_validated_with_the_executor_of_the_run(tmp_path, monkeypatch, capsys):
    """``./forge run`` runs in process unless ``ENVSIM_EXECUTOR`` says otherwise, and Dagster validates the run config
    against that job: the in-process executor's config is accepted, the multiprocess one's named."""
    monkeypatch.setenv("ENVSIM_DATA_ROOT", str(tmp_path / "data"))
    monkeypatch.setenv("DAGSTER_HOME", "")
    monkeypatch.setenv("ENVSIM_EXECUTOR", "")
    multiprocess = '{"execution": {"config": {"multiprocess": {"max_concurrent": 2}}}}'
    assert cli.main(["run", "--config-json", multiprocess]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("./forge run: --config-json: ") and "'multiprocess'" in line, line
    assert not (tmp_path / "data").exists()


def test_report_and_timings_find_the_run_history_of_the_data_root(tmp_path, monkeypatch, capsys):
    """``./forge timings`` / ``./forge report`` without ``DAGSTER_HOME`` read ``<data root>/.dagster_home`` (where
    ``./forge run`` keeps it); a data root that never had a run is one line."""
    monkeypatch.setenv("DAGSTER_HOME", "")
    assert cli.main(["timings", "--data-root", str(tmp_path / "none")]) == 3
    assert capsys.readouterr().err == (
        f"./forge timings: no run history at {tmp_path / 'none' / '.dagster_home'}: "
        "./forge run has not run on this data root (or set DAGSTER_HOME)\n"
    )
    assert cli.main(["report", "--data-root", str(tmp_path / "none")]) == 1
    (tmp_path / "mine" / ".dagster_home").mkdir(parents=True)
    monkeypatch.setenv("DAGSTER_HOME", "")
    assert cli.main(["timings", "--data-root", str(tmp_path / "mine")]) == 3  # a history, no run in it
    assert os.environ["DAGSTER_HOME"] == str(tmp_path / "mine" / ".dagster_home")
    assert "no run of envsim_main started" in capsys.readouterr().out
