"""Exploration adapts to the corpus: targets no environment can approach are dropped and named, the budget scales
with the corpus, targets an environment can reach are still pursued, and a seed gives the same trajectories.

The corpora are our own, in EnvScaler's released format, written from the example in docs/environments.md:
small environments whose tools change at most 3 fields (as ACEBench's and many hand-written ones do)."""

import json
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pipeline.collect.explore import Coverage, ExploreSettings
from pipeline.collect.run import collect_all
from pipeline.collect.sources import SourceConfig
from pipeline.core import profile
from pipeline.core.strata import Composition
from pipeline.envs.config import EnvScalerCorpus
from pipeline.store.layout import DataLayout

NOTEBOOK = '''
class NoteBook:
    """Notes with an archive."""

    def __init__(self, init_config):
        self.notes = init_config.get("notes", {})
        self.next_id = init_config.get("next_id", 1)
        self.archived = 0

    def list_notes(self):
        """List the note ids."""
        return {"success": True, "data": sorted(self.notes)}

    def get_note(self, note_id: str):
        """Read a note.

        Args:
            note_id (str): The note.
        """
        if note_id not in self.notes:
            return {"success": False, "error": f"no note {note_id}"}
        return {"success": True, "data": self.notes[note_id]}

    def add_note(self, title: str):
        """Add a note.

        Args:
            title (str): Its title.
        """
        if not title:
            return {"success": False, "error": "a note needs a title"}
        note_id = f"N{self.next_id}"
        self.notes[note_id] = {"title": title, "state": "open"}
        self.next_id += 1
        return {"success": True, "data": note_id}

    def archive_note(self, note_id: str):
        """Archive a note.

        Args:
            note_id (str): The note.
        """
        note = self.notes.get(note_id)
        if note is None or note["state"] == "archived":
            return {"success": False, "error": f"cannot archive {note_id}"}
        note["state"] = "archived"
        note["title"] = note["title"].upper()
        self.archived += 1
        return {"success": True}
'''

THERMOSTAT = '''
class Thermostat:
    """A thermostat."""

    def __init__(self, init_config):
        self.target = init_config.get("target", 20)
        self.mode = init_config.get("mode", "off")
        self.fan = "auto"

    def get_status(self):
        """Read the settings."""
        return {"success": True, "data": {"target": self.target, "mode": self.mode}}

    def set_target(self, degrees: int):
        """Set the target temperature.

        Args:
            degrees (int): Between 5 and 30.
        """
        if not 5 <= degrees <= 30:
            return {"success": False, "error": "out of range"}
        self.target = degrees
        return {"success": True}

    def set_mode(self, mode: str):
        """Set the mode.

        Args:
            mode (str): One of off, heat, cool.
        """
        if mode not in ("off", "heat", "cool"):
            return {"success": False, "error": "unknown mode"}
        self.mode = mode
        self.fan = "on" if mode != "off" else "auto"
        return {"success": True}

    def reset(self, confirm: bool):
        """Back to the factory settings.

        Args:
            confirm (bool): Must be true.
        """
        if not confirm:
            return {"success": False, "error": "not confirmed"}
        self.target, self.mode, self.fan = 20, "off", "auto"
        return {"success": True}
'''

TODO = '''
class TodoList:
    """A to-do list."""

    def __init__(self, init_config):
        self.tasks = init_config.get("tasks", {})
        self.done = 0

    def list_tasks(self):
        """List the tasks."""
        return {"success": True, "data": sorted(self.tasks)}

    def add_task(self, task_id: str, title: str):
        """Add a task.

        Args:
            task_id (str): A new id.
            title (str): What to do.
        """
        if task_id in self.tasks or not title:
            return {"success": False, "error": "bad task"}
        self.tasks[task_id] = {"title": title, "done": False}
        return {"success": True}

    def complete_task(self, task_id: str):
        """Complete a task.

        Args:
            task_id (str): The task.
        """
        task = self.tasks.get(task_id)
        if task is None or task["done"]:
            return {"success": False, "error": f"cannot complete {task_id}"}
        task["done"] = True
        task["title"] = "[x] " + task["title"]
        self.done += 1
        return {"success": True}
'''

#: a depot whose audit of "all" (one of 12 sections) recounts its 7 bins: |Δ| 7 or 8; its five other tools change
#: at most 1 field
DEPOT = '''
class Depot:
    """A depot with bins."""

    SECTIONS = ["all"] + [f"aisle_{i}" for i in range(1, 12)]

    def __init__(self, init_config):
        self.bins = init_config.get("bins", {})
        self.labels = {}
        self.last_audit = None

    def get_bin(self, bin_id: str):
        """Read a bin.

        Args:
            bin_id (str): The bin.
        """
        if bin_id not in self.bins:
            return {"success": False, "error": "no such bin"}
        return {"success": True, "data": self.bins[bin_id]}

    def fill(self, bin_id: str):
        """Fill a bin.

        Args:
            bin_id (str): The bin.
        """
        if bin_id not in self.bins:
            return {"success": False, "error": "no such bin"}
        self.bins[bin_id]["units"] += 1
        return {"success": True}

    def empty(self, bin_id: str):
        """Empty a bin.

        Args:
            bin_id (str): The bin.
        """
        if bin_id not in self.bins:
            return {"success": False, "error": "no such bin"}
        self.bins[bin_id]["units"] = 0
        return {"success": True}

    def count_bins(self):
        """How many bins."""
        return {"success": True, "data": len(self.bins)}

    def label_bin(self, bin_id: str, label: str):
        """Label a bin.

        Args:
            bin_id (str): The bin.
            label (str): The label.
        """
        if bin_id not in self.bins:
            return {"success": False, "error": "no such bin"}
        self.labels[bin_id] = label
        return {"success": True}

    def audit(self, section: str):
        """Audit a section: "all" recounts every bin.

        Args:
            section (str): One of all, aisle_1, aisle_2, aisle_3, aisle_4, aisle_5, aisle_6, aisle_7, aisle_8, aisle_9, aisle_10, aisle_11.
        """
        if section not in self.SECTIONS:
            return {"success": False, "error": "unknown section"}
        self.last_audit = section
        if section == "all":
            for bin_id in self.bins:
                self.bins[bin_id]["units"] += 100
        return {"success": True}
'''

CLASSES = {"notebook": ("NoteBook", NOTEBOOK), "thermostat": ("Thermostat", THERMOSTAT), "todo": ("TodoList", TODO),
           "depot": ("Depot", DEPOT)}
SCENARIOS = {
    "notebook": [{"notes": {"N1": {"title": "milk", "state": "open"}, "N2": {"title": "eggs", "state": "open"}}, "next_id": 3},
                 {"notes": {}, "next_id": 1}],
    "thermostat": [{"target": 18, "mode": "heat"}, {"target": 25}],
    "todo": [{"tasks": {"t1": {"title": "call", "done": False}}}, {"tasks": {}}],
    "depot": [{"bins": {f"B{i}": {"units": i} for i in range(1, 8)}}],  # 7 bins: an audit of "all" changes 8 fields
}


def write_corpus(directory: Path, envs: list[str]) -> EnvScalerCorpus:
    """The environments ``envs`` (tools derived from the methods) and two scenarios each, as a user writes them."""
    items = {env: {"env_class_name": CLASSES[env][0], "env_class_code": CLASSES[env][1],
                   "environment_introduction": CLASSES[env][0], "constraints_rules": ""} for env in envs}
    scenarios = [{"task_id": f"{env}-{i}", "env_id": env, "env_class_name": CLASSES[env][0], "init_config": config,
                  "task": f"Use the {env}."} for env in envs for i, config in enumerate(SCENARIOS[env])]
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "env_metadata.json").write_text(json.dumps(items, indent=1))
    (directory / "scenarios.json").write_text(json.dumps(scenarios, indent=1))
    return EnvScalerCorpus(directory / "env_metadata.json", directory / "scenarios.json")


def _explore(tmp_path: Path, sandbox, envs: list[str], settings: ExploreSettings, name: str = "data"):
    cfg = SourceConfig(builtin=False, bfcl_files=(), bfcl_replay=False, envscaler=(write_corpus(tmp_path / "corpus", envs),))
    lines: list[str] = []
    layout = DataLayout.at(tmp_path / name)
    result = collect_all(cfg, layout, sandbox, settings, log=lines.append)
    return result, layout, lines


THREE = ["notebook", "thermostat", "todo"]
OLD_BUDGET = 60_000  # what every corpus got before the budget scaled with it


def _finish(lines: list[str]) -> str:
    return [line for line in lines if line.startswith("exploration:")][-1]


def _shown(cov: Coverage, env: str, tool: str, calls: int, outcome: str, delta: int, args: int) -> None:
    for _ in range(calls):
        cov.add(env, tool, outcome, delta, args)


def test_the_budget_scales_with_the_corpus_and_an_explicit_one_wins():
    settings = ExploreSettings(calls_per_environment=2_000, max_call_budget=60_000)
    assert settings.budget(3) == 6_000 and settings.budget(50) == 60_000
    assert "2,000 per environment × 3 environments" in settings.budget_text(3)
    assert ExploreSettings(call_budget=700).budget(3) == 700
    assert ExploreSettings().max_call_budget == profile.current().explore_call_budget


def test_a_target_is_unreachable_once_every_tool_plateaued_short_of_it():
    cov = Coverage(ExploreSettings(plateau_calls=20, min_envs=1))
    cov.explore_envs({"e": ["small", "rare"]})
    _shown(cov, "e", "small", 50, "success", 3, 1)
    _shown(cov, "e", "rare", 10, "success", 1, 1)
    assert "difficult" in cov.short() and not cov.unreachable()  # "rare" may still show more
    assert cov.tool_weights("e", ["small", "rare"])["rare"] >= 1.0  # ...so it keeps an untried tool's weight
    _shown(cov, "e", "rare", 20, "success", 1, 1)  # now it has plateaued too
    why = cov.unreachable()
    assert why["difficult"] == "unreachable, max |Δ| seen 3"
    assert "difficult (|Δ| 7–12): unreachable, max |Δ| seen 3" in cov.unreachable_lines()
    assert "difficult" not in cov.short() and "medium_3" in cov.short()  # |Δ| 3 is reachable: still pursued
    assert not cov.worth_exploring("other")  # an environment with no tool reaches nothing
    cov.add("e", "rare", "success", 9, 1)  # a plateaued tool that shows something new is judged again
    assert "difficult" in cov.short() and "difficult" not in cov.unreachable()


def test_a_cell_short_of_environments_is_unreachable_once_every_able_environment_contributed():
    cells_only = Composition(mixture_sizes={})
    cov = Coverage(ExploreSettings(plateau_calls=10, min_envs=10), cells_only)
    cov.explore_envs({"a": ["t"], "b": ["t"]})
    _shown(cov, "a", "t", 200, "success", 1, 1)
    _shown(cov, "b", "t", 200, "success", 2, 1)
    why = cov.unreachable()
    assert why["simple_1"].startswith("unreachable, 1 of the 10 environments wanted")
    assert why["medium_4"] == "unreachable, max |Δ| seen 2"
    assert why["no_change_args0"] == "unreachable, argument counts seen: 1"  # no tool without arguments
    assert why["failure"] == "unreachable, no failure step seen"
    assert cov.satisfied()  # every target met or unreachable: exploration stops
    assert not cov.worth_exploring("a") and not cov.worth_exploring("b")
    # a Balance2 group still short of candidates keeps an environment that reaches it explored
    cov = Coverage(ExploreSettings(plateau_calls=10, min_envs=10), Composition((), {"simple": 100}))
    cov.explore_envs({"a": ["t"], "b": ["t"]})
    _shown(cov, "a", "t", 20, "success", 1, 1)
    _shown(cov, "b", "t", 20, "success", 0, 1)
    assert "b2:simple" in cov.short() and cov.worth_exploring("a") and not cov.worth_exploring("b")


def test_a_corpus_that_never_passes_delta_3_explores_in_a_fraction_of_the_old_budget(tmp_path, sandbox):
    """The issue's hand-written 3-environment corpus spent 60,000 calls on |Δ| 7–12 targets it can never reach."""
    result, _, lines = _explore(tmp_path, sandbox, THREE, ExploreSettings())
    cov = result.coverage
    assert cov.steps < OLD_BUDGET // 4
    finish = _finish(lines)
    for cell in ("medium_4 (|Δ| 4)", "medium_5 (|Δ| 5)", "medium_6 (|Δ| 6)", "difficult (|Δ| 7–12)"):
        assert f"{cell}: unreachable, max |Δ| seen 3" in finish, cell
    assert cov.stop_reason in finish
    assert cov.call_budget == 3 * ExploreSettings().calls_per_environment
    assert cov.steps <= cov.call_budget + ExploreSettings().batch_episodes * ExploreSettings().episode_length
    assert "failure (failure, |Δ| 0): unreachable, 3 of the 10 environments wanted" in finish
    assert {"medium_4", "medium_5", "medium_6", "difficult"} <= set(cov.unreachable())
    assert not {"medium_4", "medium_5", "medium_6", "difficult"} & set(cov.short())
    assert cov.cells["medium_3"] > 0  # |Δ| 3, which they reach, was explored


def test_a_rarely_chosen_tool_that_reaches_delta_8_is_still_pursued(tmp_path, sandbox):
    """The depot reaches |Δ| 7–8 only by its audit of "all": one tool of six, one section of twelve. A tool is
    judged only once it has plateaued, so the difficult cell stays a target the depot is explored for, while the
    |Δ| 4–6 cells, which no tool shows, are dropped."""
    result, _, lines = _explore(tmp_path, sandbox, ["notebook", "depot"], ExploreSettings(calls_per_environment=1_500))
    cov = result.coverage
    audit = cov.shown[("envscaler/depot", "audit")]
    assert audit.calls < cov.steps / 6 and audit.max_delta >= 7  # rarely chosen, and it got there
    assert "envscaler/depot" in cov.cell_envs["difficult"]
    assert "difficult" not in cov.unreachable() and "difficult" in cov.short()  # still pursued at the end
    assert re.fullmatch(r"unreachable, \|Δ\| seen: 0–3, (7–8|7|8)", cov.unreachable()["medium_5"])
    assert f"medium_5 (|Δ| 5): {cov.unreachable()['medium_5']}" in _finish(lines)
    assert "difficult (|Δ| 7–12): unreachable" not in _finish(lines)


def test_same_seed_same_trajectories(tmp_path, sandbox):
    """Plateaus, unreachable targets and retired environments are decided from the steps alone."""
    settings = ExploreSettings(seed=3, calls_per_environment=700, plateau_calls=40, batch_episodes=20)
    runs = [_explore(tmp_path / f"run{i}", sandbox, THREE, settings) for i in range(2)]
    (first, layout1, _), (second, layout2, _) = runs
    assert first.coverage.unreachable()  # the adaptive path was taken
    assert first.coverage.stop_reason == second.coverage.stop_reason
    assert pq.read_table(layout1.trajectories).equals(pq.read_table(layout2.trajectories))
    other, layout3, _ = _explore(tmp_path / "run3", sandbox, THREE, ExploreSettings(seed=4, calls_per_environment=700,
                                                                                     plateau_calls=40, batch_episodes=20))
    assert not pq.read_table(layout1.trajectories).equals(pq.read_table(layout3.trajectories))
