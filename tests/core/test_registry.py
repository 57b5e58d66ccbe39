"""One registry for every extension point (``pipeline.core.registry``): the environment adapters and sources and
the simulator kinds are ``Registry`` values, and an installed plugin package registers its entries through entry
points in every process — the code location's, and the sandbox worker's — with no file of the tree changed.

The plugin package is tests/support/plugin_example/ (a ``counter`` adapter and source, an ``echo`` simulator
kind): it is built into a wheel here and installed with pip into a throwaway directory that only the run's
``PYTHONPATH`` names (neither this repository nor the virtual environment changes); the sandbox binds that
directory into its worker (``pipeline.execution.isolation``)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from pipeline.core.registry import PluginError, Registry, plugin_paths

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "tests" / "support" / "plugin_example"


@dataclass(frozen=True)
class Entry:
    name: str


def test_entries_keep_their_order_and_an_unknown_name_lists_the_known_ones():
    reg: Registry[Entry] = Registry("widget", "envsim_forge.test_widgets")
    reg.register(Entry("b"))
    reg.register(Entry("a"))
    assert reg.names() == ("b", "a") and "a" in reg and reg["b"] == Entry("b") and reg.find("c") is None
    with pytest.raises(ValueError, match="widget 'a' is registered already"):
        reg.register(Entry("a"))
    with pytest.raises(KeyError, match=r"unknown widget 'c'; known: \['a', 'b'\]"):
        reg.get("c")
    reg.unregister("b")
    assert reg.names() == ("a",)


def test_a_group_outside_the_project_is_refused():
    with pytest.raises(ValueError, match="must start with 'envsim_forge.'"):
        Registry("widget", "widgets")


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def build_wheel(project: Path, out: Path) -> Path:
    """A wheel of the pure-Python plugin ``project`` (its package, and the metadata and entry points its
    ``pyproject.toml`` declares): what ``pip wheel`` makes of it, without a build backend (the test venv has
    no ``wheel`` package for setuptools to build with, and no network is needed)."""
    meta = tomllib.loads((project / "pyproject.toml").read_text())["project"]
    name, version = meta["name"].replace("-", "_"), meta["version"]
    dist_info = f"{name}-{version}.dist-info"
    files: dict[str, bytes] = {}
    for package in tomllib.loads((project / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]:
        for path in sorted((project / package).rglob("*.py")):
            files[path.relative_to(project).as_posix()] = path.read_bytes()
    files[f"{dist_info}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: {meta['name']}\nVersion: {version}\nSummary: {meta['description']}\n"
    ).encode()
    files[f"{dist_info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    groups = meta.get("entry-points", {})
    files[f"{dist_info}/entry_points.txt"] = "".join(
        f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()) + "\n" for group, eps in groups.items()
    ).encode()
    record = [_record_line(p, d) for p, d in files.items()] + [f"{dist_info}/RECORD,,"]
    files[f"{dist_info}/RECORD"] = ("\n".join(record) + "\n").encode()
    wheel = out / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for path, data in files.items():
            zf.writestr(path, data)
    return wheel


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory):
    """The example plugin, installed by pip into a directory of its own (``--target``)."""
    tmp = tmp_path_factory.mktemp("plugin")
    wheel = build_wheel(EXAMPLE, tmp)
    site = tmp / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-index",
            "--target",
            str(site),
            str(wheel),
        ],
        check=True,
        timeout=300,
    )
    return site


def _with_plugin(site: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}


def test_an_installed_plugin_is_registered_in_a_new_process(plugin_site):
    code = (
        "from pipeline.envs import registry; from pipeline.evaluate import simulators; "
        "from pipeline.core.registry import plugin_paths; import json; "
        "print(json.dumps([registry.names(), registry.ADAPTERS.names(), simulators.KINDS.names(), plugin_paths(), "
        "registry.get('counter').card_license, simulators.KINDS['echo'].baseline]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=_with_plugin(plugin_site),
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    ).stdout
    sources, adapters, kinds, paths, card, baseline = json.loads(out)
    assert sources == ["bfcl", "builtin", "envscaler", "served", "counter"]  # the project's own first, then the plugins
    assert adapters == ["bfcl", "envscaler", "counter"]
    assert kinds == ["openai", "oracle", "oracle_envsimbench", "no_change", "recorded", "echo"]
    assert paths == [os.path.realpath(plugin_site)] and card == "CC0-1.0 (counter plugin)" and baseline is True
    assert plugin_paths() == ()  # this process: no plugin installed


def test_a_plugin_that_fails_to_load_is_named(tmp_path):
    site = tmp_path / "site"
    dist = site / "broken_plugin-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[envsim_forge.simulators]\nbroken = broken_plugin:KIND\n")
    code = "from pipeline.evaluate import simulators; simulators.KINDS.names()"
    run = subprocess.run(
        [sys.executable, "-c", code], env=_with_plugin(site), cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert run.returncode != 0
    assert (
        "PluginError: plugin entry point broken = broken_plugin:KIND (envsim_forge.simulators, from broken-plugin "
        "1.0) failed to load: ModuleNotFoundError"
    ) in run.stderr
    assert PluginError.__module__ == "pipeline.core.registry"


#: a profile outside the tree, one file: the run's defaults in every section, the plugin source's settings included
MEDIUM = """
[sources.bfcl]
categories = []

[sources.builtin]
enabled = false

[sources.counter]
tasks = 2
outcome_rule = {failure_if = [{key = "value", equals = 0}], extends_default = true}

[run_policy]
explore_call_budget = 400
"""


def test_a_plugin_package_runs_through_the_dag(plugin_site, tmp_path):
    """The plugin's source is collected and its trajectories labeled in the sandbox (bwrap: its worker sees the
    plugin only through the bound directory), a benchmark is picked from its steps, and its simulator kind is
    scored by ``simulator_eval`` — all through the code location's own assets, in a process that has the
    plugin installed and no file of the tree changed; its decontamination rule and mixture composition build the
    SFT mixture. The run's defaults come from a ``medium`` profile, one file
    outside the tree, which also configures the plugin's source: its own setting (``tasks``) and an outcome rule
    (a counter back at 0 is a refusal in this source's convention) reach collection and labeling."""
    data = tmp_path / "data"
    (tmp_path / "medium.toml").write_text(MEDIUM)
    status = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True).stdout
    run = subprocess.run(
        [sys.executable, "-m", "tests.support.plugin_dag", str(data), str(tmp_path / "medium.toml")],
        env=_with_plugin(plugin_site),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["success"], run.stderr[-4000:]
    assert out["sources"][-1] == "counter" and out["kinds"][-1] == "echo"
    assert out["catalog"] == [["counter", "counter/counter"]]
    assert out["trajectory_sources"] == out["trajectory_adapters"] == ["counter"]  # its source, run by its adapter
    assert out["tasks"] == ["counter-0", "counter-1"]  # the source's own setting, from the profile
    outcomes = {(tool, outcome) for tool, outcome, _ in out["outcomes"]}
    assert ("reset", "failure") in outcomes and ("reset", "success") not in outcomes  # its declared rule labeled them
    assert {rule for _, _, rule in out["outcomes"]} != {"default"}
    assert out["steps"] and {env for env, _ in out["steps"]} == {"counter/counter"}
    decontaminate, composition, size = out["mixture"]  # the plugin's rule and composition built the mixture
    assert (decontaminate, composition) == ("episode", "changes_only") and size > 0
    assert out["mixture_strata"] == ["changes"] and out["mixture_min_delta"] > 0  # state changes only
    runs = {name: (samples, fm, cm) for name, samples, fm, cm in out["eval_runs"]}
    assert set(runs) == {"oracle", "echo", "echo-said"} and runs["echo"][0] == runs["oracle"][0] > 0
    assert runs["echo"][1:] == (100.0, 100.0)
    assert runs["echo-said"][2] == 100.0 and runs["echo-said"][1] < 100.0  # its own setting reached it
    # warnings a 1-environment corpus earns: cells and mixture sizes it cannot fill, an implausible failure share
    warned = {"composition_matches", "mixture_composition", "outcome_labels_plausible"}
    assert set(out["failed_checks"]) <= warned, out["failed_checks"]
    assert subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True).stdout == status
