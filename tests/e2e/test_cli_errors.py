"""The ``./forge`` CLI and the dg project as a user meets them: a mistake is one line naming the key,
value or variable and the fix, with a non-zero exit and no stale summary; ``--help`` documents every
option; ``dg check defs`` / ``dg list defs`` work from the repository root."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.parallel import one_at_a_time

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
#: ENVSIM_PROFILE misspelt (two pieces: tests/core/test_settings.py holds every whole ENVSIM_ name to the docs)
MISSPELT = "ENVSIM_" + "PROFLE"


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENVSIM_")}
    env.update(DAGSTER_HOME=str(tmp_path / "dagster_home"), ENVSIM_DATA_ROOT=str(tmp_path / "data"), **extra)
    (tmp_path / "dagster_home").mkdir(exist_ok=True)
    return env


@pytest.fixture(scope="module", autouse=True)
def _set_up(tmp_path_factory) -> None:
    """./forge set up once first (a stale .venv stamp reinstalls, printing pip's lines), so that the
    outputs checked below are only what each command says."""
    with one_at_a_time(tmp_path_factory, "forge-setup"):
        subprocess.run(["./forge", "setup"], cwd=ROOT, capture_output=True, timeout=1800, check=True)


def _forge(tmp_path: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["./forge", *args], cwd=ROOT, env=_env(tmp_path, **extra), capture_output=True, text=True, timeout=300
    )


def _problem_lines(proc: subprocess.CompletedProcess[str]) -> list[str]:
    return [
        line for line in (proc.stdout + proc.stderr).splitlines() if line.strip() and "Location 'file://" not in line
    ]


def test_a_config_key_typo_is_one_line_with_the_fix_and_no_run(tmp_path):
    config = tmp_path / "seed.yaml"
    config.write_text("ops:\n  benchmark_split:\n    config:\n      seeed: 1\n")
    proc = _forge(tmp_path, "run", "-c", str(config))
    assert proc.returncode == 2
    lines = _problem_lines(proc)
    assert len(lines) == 1, lines
    assert "'seeed'" in lines[0] and "ops.benchmark_split.config" in lines[0] and "did you mean 'seed'" in lines[0]
    assert "Traceback" not in proc.stderr and "Data root" not in proc.stdout and "Run " not in proc.stdout
    assert not (tmp_path / "data").exists()  # nothing started


def test_a_wrong_type_a_missing_file_and_an_unknown_job_are_named(tmp_path):
    config = tmp_path / "bad.yaml"
    config.write_text("ops:\n  benchmark_split:\n    config:\n      seed: one\n")
    proc = _forge(tmp_path, "run", "-c", str(config), "-c", str(tmp_path / "missing.yaml"))
    assert proc.returncode == 2
    text = "\n".join(_problem_lines(proc))
    assert "missing.yaml does not exist" in text
    proc = _forge(tmp_path, "run", "-c", str(config))
    (line,) = _problem_lines(proc)
    assert "ops.benchmark_split.config.seed" in line and "'one'" in line and "Int" in line
    from cli.launch import check_launch
    from pipeline.core.settings import settings

    (line,) = check_launch("envsim_mian", {}, settings())
    assert "no job 'envsim_mian'" in line and "envsim_main" in line and "__ASSET_JOB" not in line
    assert check_launch("envsim_main", {}, settings()) == []


def test_an_unreadable_config_json_or_file_is_one_line_and_no_run(tmp_path):
    """``--config-json`` that is not JSON, or not an object, and a file that is not YAML: one line each naming it
    and the fix, exit 2, nothing started."""
    proc = _forge(tmp_path, "run", "--config-json", "{ops: 1}")
    (line,) = _problem_lines(proc)
    assert proc.returncode == 2 and "pass e.g." in line
    assert line.startswith("./forge run: --config-json is not a JSON object (")
    proc = _forge(tmp_path, "run", "--config-json", "[1]")
    (line,) = _problem_lines(proc)
    assert "--config-json is not a JSON object (not a JSON object)" in line
    bad = tmp_path / "bad.yaml"
    bad.write_text("ops: [unclosed\n")
    proc = _forge(tmp_path, "run", "-c", str(bad))
    (line,) = _problem_lines(proc)
    assert proc.returncode == 2 and f"run config file {bad} is not valid YAML (" in line and "fix the file" in line
    assert "Traceback" not in proc.stderr and not (tmp_path / "data").exists()


def test_the_first_config_file_wins_in_the_run_as_in_the_check(tmp_path):
    """What Dagster validated is what the run gets: ``-c A -c B`` with a key in both runs with A's value (files
    listed first win), as the check saw it. (dg launch's own merge lets the last file win: with both files handed
    to it, the check passed A's ``seed: 3`` and the run failed on B's ``seed: one``.) The corpus yields no
    environment, so the run stops at its first step, which names it."""
    corpus = tmp_path / "191_env_metadata.json"
    corpus.write_text("{}")
    first = tmp_path / "first.yaml"
    first.write_text(
        "resources:\n  sources:\n    config:\n      builtin: {enabled: false}\n      bfcl: {categories: []}\n"
        f"      envscaler:\n        - {{env_items: {corpus}}}\n"
        "ops:\n  benchmark_split:\n    config:\n      seed: 3\n"
    )
    second = tmp_path / "second.yaml"
    second.write_text("ops:\n  benchmark_split:\n    config:\n      seed: one\n")
    proc = _forge(tmp_path, "run", "-c", str(first), "-c", str(second))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1 and "FAILED at step environment_catalog" in out, out[-2000:]
    assert "'one'" not in out and "DagsterInvalidConfigError" not in out, out[-2000:]


@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        (
            "ENVSIM_PROFILE",
            "bogus",
            "ENVSIM_PROFILE must be a profile (default, small) or the path of a profile's .toml file, got 'bogus'",
        ),
        ("ENVSIM_SHARDS", "two", "ENVSIM_SHARDS must be a whole number >= 1, got 'two'"),
        (
            "ENVSIM_SANDBOX",
            "docker",
            "ENVSIM_SANDBOX must be one of bwrap, trusted, got 'docker'",
        ),
        (
            "ENVSIM_EXECUTOR",
            "spark",
            "ENVSIM_EXECUTOR must be one of multiprocess, in_process, celery, k8s, got 'spark'",
        ),
        ("ENVSIM_LAUNCHER", "lsf", "ENVSIM_LAUNCHER must be one of local, slurm, got 'lsf'"),  # not `local` silently
        ("ENVSIM_PARALLEL_RUNS", "all", "ENVSIM_PARALLEL_RUNS must be a whole number >= 1, got 'all'"),
        (  # a misspelt setting is not ignored without a word (the run would use the default profile)
            MISSPELT,
            "small",
            f"{MISSPELT} is not a setting: did you mean ENVSIM_PROFILE? rename or unset it (docs/settings.md lists",
        ),
        (
            "ENVSIM_SPLIT_CRON",
            "every monday",
            "ENVSIM_SPLIT_CRON must be a cron schedule of 5 fields, minute hour day-of-month month day-of-week (UTC), "
            "e.g. '0 4 * * 1', got 'every monday': fix the value or unset the variable",
        ),
    ],
)
def test_a_bad_variable_is_printed_once_without_a_traceback(tmp_path, variable, value, expected):
    proc = _forge(tmp_path, "run", **{variable: value})
    assert proc.returncode == 2
    lines = _problem_lines(proc)
    assert len(lines) == 1 and lines[0].startswith(expected), lines
    assert "Traceback" not in proc.stderr


def test_a_forge_venv_that_is_no_environment_is_one_line(tmp_path):
    """``FORGE_VENV`` (an existing environment used as it is) naming a folder without ``bin/python``: one line, exit 2,
    nothing created or installed."""
    proc = _forge(tmp_path, "run", FORGE_VENV=str(tmp_path / "no-venv"))
    assert proc.returncode == 2
    assert _problem_lines(proc) == [
        f"./forge: FORGE_VENV={tmp_path / 'no-venv'} has no bin/python: unset FORGE_VENV or name a virtual environment"
    ]
    assert not (tmp_path / "no-venv").exists() and not (tmp_path / "data").exists()


def test_no_stale_timings_when_no_run_started(tmp_path, monkeypatch, capsys):
    from cli.launch import print_run_timings

    assert print_run_timings(tmp_path, tmp_path / "data", since=time.time() + 3600) is False
    assert "no run of envsim_main started by this command" in capsys.readouterr().out


def test_an_unknown_run_option_is_forges_one_line_not_dgs_usage(tmp_path):
    """``./forge run --sed 1``: ``./forge run`` names its options (``--seed N`` among them), exit 2, nothing starts
    (issue 43, item 3)."""
    proc = _forge(tmp_path, "run", "--sed", "1")
    assert proc.returncode == 2
    assert _problem_lines(proc) == [
        "./forge run: unrecognized arguments: --sed 1: it takes -c/--config FILE (repeatable), --config-json JSON, "
        "--seed N (./forge run -h)"
    ]
    assert "dg launch" not in proc.stdout + proc.stderr and not (tmp_path / "data").exists()


def test_run_help_is_its_own_usage_and_check_settings_confirms(tmp_path):
    """``./forge run -h``: its options, not the global usage after them; ``./forge check-settings``: one line when
    the settings are usable (issue 43, item 7)."""
    proc = _forge(tmp_path, "run", "-h")
    assert proc.returncode == 0 and proc.stdout.startswith("usage: ./forge run ")
    assert "--seed N" in proc.stdout and "--config-json JSON" in proc.stdout and "-c FILE, --config FILE" in proc.stdout
    assert "usage: ./forge COMMAND" not in proc.stdout and "download envscaler" not in proc.stdout
    proc = _forge(tmp_path, "check-settings")
    assert proc.returncode == 0 and _problem_lines(proc) == [
        f"settings OK: ENVSIM_DATA_ROOT set, the others at their defaults (docs/settings.md); profile default, data "
        f"root {tmp_path / 'data'}, split schedule '0 4 * * 1' (UTC)"
    ]


def test_help_documents_every_command_and_the_run_options(tmp_path):
    for args in (["--help"], ["-h"], ["help"]):
        proc = _forge(tmp_path, *args)
        assert proc.returncode == 0, args
        for word in (
            "-c/--config",
            "--config-json",
            "ENVSIM_DATA_ROOT",
            "bench-model",
            "download envscaler",
            "train-env",
            "serve-env",
            "serve-venv",
            "ui",
            "test",
        ):
            assert word in proc.stdout, (args, word)
    proc = _forge(tmp_path, "download", "-h")
    assert proc.returncode == 0 and "--endpoint" in proc.stdout and "--data-root" in proc.stdout
    proc = _forge(tmp_path, "frobnicate")
    assert proc.returncode == 2 and "unknown command 'frobnicate'" in proc.stderr and "--help" in proc.stderr


def test_an_offline_download_says_how_to_go_on_and_leaves_no_empty_folder(tmp_path):
    root = tmp_path / "corpus-root"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "cli",
            "download",
            "envscaler",
            "--data-root",
            str(root),
            "--endpoint",
            "http://127.0.0.1:9",
        ],  # nothing listens on the discard port
        cwd=ROOT,
        env={**_env(tmp_path), "HF_HUB_DISABLE_PROGRESS_BARS": "1", "HF_HUB_ETAG_TIMEOUT": "2"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert "127.0.0.1:9" in lines[0] and "HF_ENDPOINT" in lines[0] and "resources.sources.envscaler" in lines[0]
    assert not root.exists()


def test_dg_check_and_list_defs_work_from_the_repository_root(tmp_path):
    env = _env(tmp_path)
    check = subprocess.run(
        [str(VENV_BIN / "dg"), "check", "defs"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    assert check.returncode == 0, check.stdout[-2000:] + check.stderr[-2000:]
    assert "All definitions loaded successfully" in check.stdout + check.stderr
    listed = subprocess.run(
        [str(VENV_BIN / "dg"), "list", "defs", "--json"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    assert listed.returncode == 0, listed.stderr[-2000:]
    defs = json.loads(listed.stdout[listed.stdout.index("{") :])
    assert {"weekly_splits"} <= {s["name"] for s in defs["schedules"]}
    assert {"splits_on_new_steps", "curriculum_on_new_eval"} <= {s["name"] for s in defs["sensors"]}
    assert "envsim_main" in {j["name"] for j in defs["jobs"]}


def test_the_code_location_is_named_after_the_project():
    import tomllib

    import yaml

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["tool"]["dg"]["directory_type"] == "project"
    assert project["tool"]["dg"]["project"]["code_location_name"] == "envsim_forge"
    workspace = yaml.safe_load((ROOT / "workspace.yaml").read_text())
    assert workspace["load_from"][0]["python_module"]["location_name"] == "envsim_forge"


def _usage_commands(text: str) -> list[str]:
    """The commands ``./forge --help`` lists (its indented lines that start with a lower-case word)."""
    import re

    return sorted({m.group(1) for m in re.finditer(r"^  ([a-z][a-z-]+)\b", text, re.M)})


def _tree_copy(tmp_path: Path, venv: bool) -> Path:
    """The tracked files of the repository in ``tmp_path/tree``; with ``venv``, a ``.venv`` whose python and dg
    run the real ones but record a pip call (an install) in ``installs.log`` instead of running it."""
    tree = tmp_path / "tree"
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    for name in files:
        if (ROOT / name).is_file():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            (tree / name).write_bytes((ROOT / name).read_bytes())
            (tree / name).chmod((ROOT / name).stat().st_mode)
    if venv:
        (tree / ".venv" / "bin").mkdir(parents=True)
        for tool in ("python", "dg"):
            wrapper = tree / ".venv" / "bin" / tool
            wrapper.write_text(
                f'#!/bin/sh\ncase " $* " in *" pip "*) echo "$0 $*" >> {tmp_path / "installs.log"}; exit 1;; esac\n'
                f'exec {VENV_BIN / tool} "$@"\n'
            )
            wrapper.chmod(0o755)
    return tree


@pytest.mark.parametrize("venv", [True, False], ids=["with-venv", "bare-tree"])
def test_help_on_every_command_installs_nothing(tmp_path, venv):
    """``./forge COMMAND -h`` for every command of the usage prints help and exits 0; nothing is installed:
    no .venv-train, no pip call, and in a bare tree no .venv either (issue 32, item 7)."""
    tree = _tree_copy(tmp_path, venv)
    env = {**_env(tmp_path), "PYTHON": str(tmp_path / "no-python")}  # a venv creation would fail loudly
    env.pop("FORGE_VENV", None)  # the tree's own .venv (or none)
    usage = subprocess.run(["./forge", "--help"], cwd=tree, env=env, capture_output=True, text=True, timeout=60)
    commands = _usage_commands(usage.stdout)
    assert {
        "run",
        "test",
        "ui",
        "bench",
        "bench-scale",
        "bench-model",
        "download",
        "train-env",
        "serve-env",
        "serve-venv",
        "setup",
    } <= set(commands)
    for n, command in enumerate(commands):  # -h and --help take turns: each flag reaches half the commands
        flag = ("-h", "--help")[n % 2]
        argv = ["./forge", command, flag]
        proc = subprocess.run(argv, cwd=tree, env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, (command, flag, proc.stderr[-2000:])
        assert "usage" in proc.stdout.lower(), (command, flag, proc.stdout[:500])
        assert "Traceback" not in proc.stderr, (command, proc.stderr[-2000:])
    assert not (tree / ".venv-train").exists() and not (tree / ".venv-serve").exists()
    assert not (tmp_path / "installs.log").exists(), (tmp_path / "installs.log").read_text()
    assert (tree / ".venv").exists() == venv
    if venv:  # the options themselves, from the command's own parser
        proc = subprocess.run(
            ["./forge", "bench-model", "-h"], cwd=tree, env=env, capture_output=True, text=True, timeout=120
        )
        assert "--checkpoint" in proc.stdout and "--per-cell" in proc.stdout
        proc = subprocess.run(["./forge", "ui", "-h"], cwd=tree, env=env, capture_output=True, text=True, timeout=120)
        assert "usage: ./forge ui" in proc.stdout and "--port" in proc.stdout and "--host" in proc.stdout


def test_bench_model_checks_the_weights_before_installing_the_serving_environment(tmp_path):
    """``./forge bench-model --checkpoint <Hub id not in the cache>``: one line on how to provide the weights, exit 2,
    and no .venv-train (the 2 GB LLaMA-Factory environment) was created or installed (issue 32, item 7)."""
    import hashlib

    tree = _tree_copy(tmp_path, venv=True)
    stamp = hashlib.sha1(
        (tree / "pyproject.toml").read_bytes() + (tree / "requirements-nodeps.txt").read_bytes()
    ).hexdigest()[:12]
    (tree / ".venv" / f".stamp-{stamp}").touch()  # .venv is set up: only what bench-model does next counts
    (tmp_path / "hub").mkdir()
    env = {**_env(tmp_path), "PYTHON": str(tmp_path / "no-python"), "HF_HUB_CACHE": str(tmp_path / "hub")}
    env.pop("FORGE_VENV", None)  # the tree's own .venv
    proc = subprocess.run(
        ["./forge", "bench-model", "--checkpoint", "Qwen/Qwen2.5-0.5B-Instruct"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stdout + proc.stderr
    assert "hf download Qwen/Qwen2.5-0.5B-Instruct" in lines[0] and "Traceback" not in proc.stderr
    assert not (tree / ".venv-train").exists() and not (tmp_path / "installs.log").exists()


def test_a_config_file_and_config_json_combine(tmp_path):
    """``-c FILE --config-json JSON`` (the usage line) reaches the run; dg launch alone refuses the pair. The
    corpus yields no environment, so the run stops at its first step, which names it."""
    corpus = tmp_path / "191_env_metadata.json"
    corpus.write_text("{}")
    config = tmp_path / "run.yaml"
    config.write_text(
        "resources:\n  sources:\n    config:\n      builtin: {enabled: false}\n      bfcl: {categories: []}\n"
        f"      envscaler:\n        - {{env_items: {corpus}}}\n"
    )
    proc = _forge(
        tmp_path, "run", "-c", str(config), "--config-json", '{"ops": {"benchmark_split": {"config": {"seed": 3}}}}'
    )
    out = proc.stdout + proc.stderr
    assert "Cannot specify both" not in out, out[-2000:]
    assert proc.returncode == 1 and "FAILED at step environment_catalog" in out, out[-2000:]
    assert not list(Path(os.environ.get("TMPDIR", "/tmp")).glob("forge-config-json.*"))  # the JSON's file is gone
