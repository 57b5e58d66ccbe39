"""The one CLI (``cli/``, what ``./forge`` hands every command to): its usage names every command it
has, a mistake is one line, help needs nothing but the standard library, and what a command's processes share
(the absolute data root, one run history per data root with the project's ``dagster.yaml``) is resolved once here
and passed on as a value: this process's environment is never written."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli import base, entry

ROOT = Path(__file__).resolve().parents[2]


def test_the_usage_lists_every_command_and_only_those(capsys):
    assert entry.main(["--help"]) == 0
    out = capsys.readouterr().out
    listed = {line.split()[0] for line in out.splitlines() if line.startswith("  ") and not line.startswith("   ")}
    assert listed == set(base.COMMANDS)
    for word in ("-c/--config", "--config-json", "ENVSIM_DATA_ROOT", "files listed first win"):
        assert word in out


def test_an_unknown_command_and_a_set_up_command_are_one_line(capsys):
    assert entry.main(["frobnicate"]) == 2
    assert capsys.readouterr().err == "./forge: unknown command 'frobnicate': run ./forge --help for the commands\n"
    assert entry.main(["train-env"]) == 2
    assert capsys.readouterr().err == "./forge train-env builds an environment: run it as ./forge train-env\n"
    assert entry.main(["train-env", "-h"]) == 0 and "usage: ./forge COMMAND" in capsys.readouterr().out


@pytest.mark.parametrize("command", sorted(base.COMMANDS))
def test_help_without_the_project_environment_imports_nothing_of_it(command):
    """The machine's python3 in a tree without .venv: no Dagster, no pyarrow; ``COMMAND -h`` still prints a usage
    and exits 0 (``run -h`` its own options), and imports nothing of the project's dependencies."""
    code = (
        "import sys; sys.modules['dagster'] = None\n"
        "from cli.entry import main\n"
        f"code = main([{command!r}, '-h'])\n"
        "assert not {'pyarrow', 'pydantic', 'pipeline.core.settings'} & set(sys.modules), sorted(sys.modules)\n"
        "sys.exit(code)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "usage" in proc.stdout.lower() and "Traceback" not in proc.stderr
    if command == "run":
        assert "--config-json JSON" in proc.stdout and "-c FILE, --config FILE" in proc.stdout
    elif command not in ("train-env", "serve-venv", "openenv-env", "setup"):
        assert f"./forge setup first, then ./forge {command} -h" in proc.stdout


def test_what_a_commands_processes_share_is_a_value_and_the_environment_stays(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ENVSIM_DATA_ROOT", "rel/data")
    monkeypatch.setenv("DAGSTER_HOME", "")  # unset (and restored after the test)
    before = dict(os.environ)
    env = base.child_env()
    root = tmp_path / "rel" / "data"
    assert base.data_root() == root and env["ENVSIM_DATA_ROOT"] == str(root)
    assert env["DAGSTER_HOME"] == str(root / ".dagster_home")
    assert (root / ".dagster_home" / "dagster.yaml").read_text() == (ROOT / "dagster.yaml").read_text()
    assert dict(os.environ) == before  # read, never written
    # a chosen home stays as its user wrote it
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    assert base.dagster_home(root) == home and base.dagster_home(root) == home
    assert (home / "dagster.yaml").read_text() == "telemetry:\n  enabled: false\n"


def test_the_entry_tier_only_reads_the_users_environment():
    """``grep os.environ`` in the entry tier: every use reads it (issue 42, item 3)."""
    import re

    entry_tier = [
        *sorted((ROOT / "cli").rglob("*.py")),
        ROOT / "assets" / "dev_ui.py",
        ROOT / "assets" / "definitions.py",
    ]
    assert len(entry_tier) > 10, entry_tier
    for path in entry_tier:
        for line in path.read_text().splitlines():
            if "os.environ" in line:
                assert not re.search(r"os\.environ(\[[^]]+\]\s*=|\.(setdefault|update|pop)\(|\s*\|=)", line), line
                assert not re.search(r"os\.(putenv|unsetenv)\(", line), line


def test_a_run_config_error_writes_nothing(tmp_path, monkeypatch, capsys):
    """``./forge run`` with a config it cannot use: one line, exit 2, and no data root or run history was made
    (``DAGSTER_HOME`` unset: it would be under the data root)."""
    monkeypatch.setenv("ENVSIM_DATA_ROOT", str(tmp_path / "data"))
    monkeypatch.setenv("DAGSTER_HOME", "")
    monkeypatch.setenv("ENVSIM_EXECUTOR", "")
    assert entry.main(["run", "--config-json", '{"ops": {"benchmark_split": {"config": {"seeed": 1}}}}']) == 2
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
    assert entry.main(["run", "--config-json", multiprocess]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("./forge run: --config-json: ") and "'multiprocess'" in line, line
    assert not (tmp_path / "data").exists()


def test_report_and_timings_find_the_run_history_of_the_data_root(tmp_path, monkeypatch, capsys):
    """``./forge timings`` / ``./forge report`` without ``DAGSTER_HOME`` read ``<data root>/.dagster_home`` (where
    ``./forge run`` keeps it); a data root that never had a run is one line."""
    monkeypatch.setenv("DAGSTER_HOME", "")
    assert entry.main(["timings", "--data-root", str(tmp_path / "none")]) == 3
    assert capsys.readouterr().err == (
        f"./forge timings: no run history at {tmp_path / 'none' / '.dagster_home'}: "
        "./forge run has not run on this data root (or set DAGSTER_HOME)\n"
    )
    assert entry.main(["report", "--data-root", str(tmp_path / "none")]) == 1
    (tmp_path / "mine" / ".dagster_home").mkdir(parents=True)
    monkeypatch.setenv("DAGSTER_HOME", "")
    assert entry.main(["timings", "--data-root", str(tmp_path / "mine")]) == 3  # a history, no run in it
    assert os.environ["DAGSTER_HOME"] == ""  # found, not set
    assert "no run of envsim_main started" in capsys.readouterr().out


def test_a_bad_schedule_setting_is_one_line_from_check_settings_and_run(tmp_path, monkeypatch, capsys):
    """``ENVSIM_SPLIT_CRON="every monday"``: ``./forge check-settings`` and ``./forge run`` each say it in one line
    (the variable, what it takes, the fix), exit 2, and the run starts nothing; a usable setting is confirmed in one
    line (issue 43, items 1 and 7)."""
    monkeypatch.setenv("ENVSIM_DATA_ROOT", str(tmp_path / "data"))
    monkeypatch.setenv("DAGSTER_HOME", "")
    monkeypatch.setenv("ENVSIM_SPLIT_CRON", "every monday")
    expected = (
        "ENVSIM_SPLIT_CRON must be a cron schedule of 5 fields, minute hour day-of-month month day-of-week (UTC), "
        "e.g. '0 4 * * 1', got 'every monday': fix the value or unset the variable"
    )
    assert entry.main(["check-settings"]) == 2
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", expected + "\n")
    assert entry.main(["run"]) == 2
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", expected + "\n")
    assert entry.main(["ui"]) == 2 and capsys.readouterr().err == f"./forge ui: {expected}\n"
    assert not (tmp_path / "data").exists()  # nothing started
    monkeypatch.setenv("ENVSIM_SPLIT_CRON", "30 5 * * mon-fri")
    assert entry.main(["check-settings"]) == 0
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out == (
        "settings OK: ENVSIM_DATA_ROOT, ENVSIM_SPLIT_CRON set, the others at their defaults (docs/settings.md); "
        f"profile default, data root {tmp_path / 'data'}, split schedule '30 5 * * mon-fri' (UTC)\n"
    )


@pytest.mark.parametrize(
    "argv, problem",
    [
        (["--sed", "1"], "unrecognized arguments: --sed 1"),
        (["--seed", "one"], "argument --seed: invalid int value: 'one'"),
        (["--partition", "x"], "unrecognized arguments: --partition x"),
        (["everything"], "unrecognized arguments: everything"),
    ],
)
def test_an_unknown_option_is_one_line_naming_the_options_of_forge_run(argv, problem, capsys):
    """Not dg launch's usage: ``./forge run``'s own line, its options, exit 2 (issue 43, item 3)."""
    with pytest.raises(SystemExit) as exit_:
        entry.main(["run", *argv])
    assert exit_.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == (
        f"./forge run: {problem}: it takes -c/--config FILE (repeatable), --config-json JSON, --seed N "
        "(./forge run -h)\n"
    )


def test_seed_sets_both_splits_over_the_config(tmp_path):
    """``./forge run --seed 7``: the benchmark's and the mixture's seed, over ``-c`` and ``--config-json``."""
    from cli.launch import check_launch, load_run_config
    from pipeline.core.settings import settings

    config = tmp_path / "run.yaml"
    config.write_text("ops:\n  benchmark_split:\n    config:\n      seed: 1\n      on_shortfall: warn\n")
    run_config, problems = load_run_config([str(config)], '{"ops": {"sft_mixture": {"config": {"seed": 2}}}}', seed=7)
    assert problems == [] and run_config == {
        "ops": {
            "benchmark_split": {"config": {"seed": 7, "on_shortfall": "warn"}},
            "sft_mixture": {"config": {"seed": 7}},
        }
    }
    assert check_launch("envsim_main", run_config, settings()) == []  # what Dagster accepts for the job
    assert load_run_config([str(config)])[0]["ops"]["benchmark_split"]["config"]["seed"] == 1  # no --seed: the file's


def test_run_help_is_its_own_usage_only(capsys):
    with pytest.raises(SystemExit) as exit_:
        entry.main(["run", "-h"])
    out = capsys.readouterr().out
    assert exit_.value.code == 0 and out.startswith("usage: ./forge run [-h] [-c FILE] [--config-json JSON] [--seed N]")
    assert "--seed N" in out and "usage: ./forge COMMAND" not in out and "bench-model" not in out


def test_setup_filters_only_the_editable_install_warning():
    """``./forge setup``'s ``pip install -e .`` does not print setuptools' "Editable installation … folders in your
    working directory with the same name as your package" block (pip shows a build backend's UserWarning as
    BuildBackendWarning), and nothing else is hidden (issue 43, item 8)."""
    import re

    text = (ROOT / "forge").read_text()
    (value,) = re.findall(r'PYTHONWARNINGS="\$\{PYTHONWARNINGS:\+\$PYTHONWARNINGS,\}([^"]+)"', text)
    assert 'pip install -q -e ".[dev]"' in text.split(value, 1)[1].split("\n", 2)[1]  # on the editable install
    code = (
        "import warnings\n"
        "from pip._vendor.pyproject_hooks import BuildBackendWarning\n"
        "block = ('Editable installation.\\n!!\\n\\n' + '*' * 80\n"
        "         + '\\nPlease be careful with folders in your working directory with the same\\nname as your '\n"
        "         'package as they may take precedence during imports.\\n')\n"
        "warnings.warn(block, UserWarning)  # in the build backend's process\n"
        "warnings.warn_explicit(block, BuildBackendWarning, 'editable_wheel.py', 354)  # pip shows it again\n"
        "warnings.warn('another warning', UserWarning)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], env={**os.environ, "PYTHONWARNINGS": value}, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert "Editable installation" not in proc.stderr and "another warning" in proc.stderr
    bare = subprocess.run([sys.executable, "-c", code], env=os.environ, capture_output=True, text=True)
    assert bare.stderr.count("Editable installation") == 2  # what ./forge setup printed before


def test_a_plugin_package_adds_a_command_by_entry_point_alone(tmp_path):
    """A package outside the tree (tests/support/plugin_command: one function, one ``envsim_forge.commands`` entry
    point), installed with pip: ``./forge --help`` lists its command and ``./forge hello`` runs it, with no file of
    this repository changed (docs/extending.md "A CLI command")."""
    from tests.core.test_registry import build_wheel

    wheel = build_wheel(ROOT / "tests" / "support" / "plugin_command", tmp_path)
    site = tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--target", str(site)]
    subprocess.run([*pip, str(wheel)], check=True, timeout=300)
    env = {**os.environ, "PYTHONPATH": str(site), "ENVSIM_DATA_ROOT": str(tmp_path / "data")}

    def forge(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "cli", *args]
        return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)

    listed = forge("--help")
    assert listed.returncode == 0 and "  hello [NAME]   a plugin's command" in listed.stdout, listed.stderr
    said = forge("hello", "forge")
    assert (said.returncode, said.stdout) == (0, f"hello forge from {tmp_path / 'data'}\n"), said.stderr
    assert "hello" not in set(base.COMMANDS)  # not installed in this process: the tree itself has no such command


def test_check_settings_refuses_a_data_root_that_cannot_work(tmp_path, monkeypatch, capsys):
    """A data root that is a file, one on a read-only filesystem and one on a full disk: ``./forge check-settings``,
    ``./forge run`` and ``./forge ui`` each refuse it in one line naming the path and the fix, exit 2, before
    anything is written (issue 52, item 5); a usable one is confirmed."""
    from tests.support.disks import fill, tmpfs

    monkeypatch.setenv("DAGSTER_HOME", "")
    a_file = tmp_path / "root-file"
    a_file.write_text("not a directory")
    fix = "set ENVSIM_DATA_ROOT to a writable directory on a disk with free space"
    expected = {
        a_file: f"the data root {a_file} is a file, not a directory: {fix}",
        a_file / "data": f"the data root {a_file / 'data'} cannot be made: {a_file} is a file, not a directory: {fix}",
    }
    for root, line in expected.items():
        monkeypatch.setenv("ENVSIM_DATA_ROOT", str(root))
        for argv, prefix in ((["check-settings"], ""), (["run"], ""), (["ui"], "./forge ui: ")):
            assert entry.main(argv) == 2, argv
            captured = capsys.readouterr()
            assert (captured.out, captured.err) == ("", prefix + line + "\n"), argv
    with tmpfs(tmp_path / "ro", "1m", read_only=True) as ro:
        monkeypatch.setenv("ENVSIM_DATA_ROOT", str(ro / "data"))
        assert entry.main(["check-settings"]) == 2
        assert capsys.readouterr().err == (
            f"the data root {ro / 'data'} (its nearest existing folder {ro}) is not writable by this user or is on a "
            f"read-only filesystem: {fix}\n"
        )
    with tmpfs(tmp_path / "full", "1m") as full:
        (full / "data").mkdir()
        fill(full)
        monkeypatch.setenv("ENVSIM_DATA_ROOT", str(full / "data"))
        assert entry.main(["check-settings"]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"the data root {full / 'data'} has no space left: 0 bytes free") and err.endswith(
            f"free space there or {fix}\n"
        ), err
        (full / "fill").unlink()
        assert entry.main(["check-settings"]) == 0
        assert f"data root {full / 'data'}" in capsys.readouterr().out


def test_a_second_signal_during_the_clean_up_lets_the_clean_up_finish():
    """``timeout`` signals ``./forge`` and then its whole process group: the first SIGTERM interrupts the command,
    a second one arriving while its ``finally`` blocks run is let pass, so the clean-up completes."""
    script = (
        "import os, signal, time\n"
        "from cli.entry import interrupt_on_signals\n"
        "interrupt_on_signals()\n"
        "try:\n"
        "    os.kill(os.getpid(), signal.SIGTERM); time.sleep(5); print('not interrupted')\n"
        "except KeyboardInterrupt as exc:\n"
        "    print('interrupted by', exc)\n"
        "finally:\n"
        "    os.kill(os.getpid(), signal.SIGTERM); os.kill(os.getpid(), signal.SIGHUP); time.sleep(0.2)\n"
        "    print('clean-up finished')\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["interrupted by SIGTERM", "clean-up finished"]
