"""A hand-written corpus in EnvScaler's released format, as a user writes one from docs/environments.md: small
environments whose tools change at most 3 fields (as ACEBench's and many hand-written ones do), refusing with
``{"success": False, "error": ...}``, and a depot that reaches |Δ| 7–8 by one rarely chosen call."""

from pathlib import Path

from pipeline.envs.config import EnvScalerCorpus
from tests.support.user_corpora import env_item, write_released

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
            section (str): One of all, aisle_1, aisle_2, aisle_3, aisle_4, aisle_5, aisle_6, aisle_7, aisle_8, \
aisle_9, aisle_10, aisle_11.
        """
        if section not in self.SECTIONS:
            return {"success": False, "error": "unknown section"}
        self.last_audit = section
        if section == "all":
            for bin_id in self.bins:
                self.bins[bin_id]["units"] += 100
        return {"success": True}
'''

CLASSES = {
    "notebook": ("NoteBook", NOTEBOOK),
    "thermostat": ("Thermostat", THERMOSTAT),
    "todo": ("TodoList", TODO),
    "depot": ("Depot", DEPOT),
}
SCENARIOS = {
    "notebook": [
        {"notes": {"N1": {"title": "milk", "state": "open"}, "N2": {"title": "eggs", "state": "open"}}, "next_id": 3},
        {"notes": {}, "next_id": 1},
    ],
    "thermostat": [{"target": 18, "mode": "heat"}, {"target": 25}],
    "todo": [{"tasks": {"t1": {"title": "call", "done": False}}}, {"tasks": {}}],
    "depot": [{"bins": {f"B{i}": {"units": i} for i in range(1, 8)}}],  # 7 bins: an audit of "all" changes 8 fields
}


def write_corpus(directory: Path, envs: list[str]) -> EnvScalerCorpus:
    """The environments ``envs`` (tools derived from the methods) and two scenarios each, as a user writes them."""
    items = {env: env_item(*CLASSES[env]) for env in envs}
    scenarios = [
        {
            "task_id": f"{env}-{i}",
            "env_id": env,
            "env_class_name": CLASSES[env][0],
            "init_config": config,
            "task": f"Use the {env}.",
        }
        for env in envs
        for i, config in enumerate(SCENARIOS[env])
    ]
    return EnvScalerCorpus(*write_released(directory, items, scenarios, "env_metadata.json"))


#: the three environments whose tools change at most 3 fields
THREE = ["notebook", "thermostat", "todo"]
