"""Corpora in EnvScaler's released format that look like what users bring, not like the embedded default.

Three shapes, each written to disk as ``191_env_metadata.json`` + ``scenarios.json`` (the released layout):

- :func:`write_generated_corpus` — dozens of LLM-style environments (``TypedDict`` entity types, default data in
  ``__init__``, refusals as ``{"success": False, "error": ...}``, a few raising exceptions) with only a few scenarios
  each. Some environments have batch tools whose state change grows with the batch (|Δ| up to 13), most never pass
  |Δ| 6: the property of EnvScaler's released subsets where few environments hold the difficult candidates.
- :func:`write_status_corpus` — a small ACEBench-style corpus: phone/travel/reminder APIs that refuse with
  ``{"status": False, "message": ...}``, answer bare data dicts, use integer dict keys, and never change more than 3
  fields per call.
- :func:`write_tiny_corpus` — three hand-written environments in the style of docs/environments.md, |Δ| ≤ 2.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
from pathlib import Path
from typing import Any

import yaml

from pipeline.store.layout import DataLayout

#: the checkout ``./forge`` runs in
PROJECT = Path(__file__).resolve().parents[2]

DOMAINS = [
    ("ParcelDepot", "parcel", "courier"),
    ("GymDesk", "membership", "trainer"),
    ("FleetYard", "vehicle", "driver"),
    ("SeedBank", "sample", "curator"),
    ("ConcertBox", "ticket", "agent"),
    ("PetClinic", "patient", "vet"),
    ("ToolShed", "tool", "borrower"),
    ("BikeShare", "bike", "rider"),
    ("PrintShop", "job", "operator"),
    ("Greenhouse", "tray", "gardener"),
    ("Archive", "record", "archivist"),
    ("Kitchen", "order", "cook"),
    ("Laundry", "load", "attendant"),
    ("Harbor", "berth", "pilot"),
    ("Observatory", "slot", "astronomer"),
    ("Bakery", "batch", "baker"),
    ("Museum", "exhibit", "guide"),
    ("Pharmacy", "script", "pharmacist"),
    ("Stadium", "seat", "usher"),
    ("Vineyard", "barrel", "vintner"),
    ("Campsite", "pitch", "ranger"),
    ("RepairBay", "ticket", "mechanic"),
    ("Studio", "booking", "engineer"),
    ("Apiary", "hive", "keeper"),
    ("Lab", "assay", "chemist"),
    ("Mailroom", "letter", "clerk"),
    ("Marina", "boat", "skipper"),
    ("TeaHouse", "table", "server"),
    ("Forge", "blade", "smith"),
    ("Orchard", "row", "picker"),
    ("Quarry", "block", "cutter"),
    ("Theater", "show", "stagehand"),
    ("Zoo", "enclosure", "zookeeper"),
    ("Brewery", "tank", "brewer"),
    ("Dojo", "student", "sensei"),
    ("Ferry", "crossing", "deckhand"),
    ("Hostel", "bed", "host"),
    ("Kennel", "dog", "walker"),
    ("Salon", "appointment", "stylist"),
    ("Warehouse", "pallet", "picker"),
    ("Cinema", "screening", "projectionist"),
    ("Garage", "car", "valet"),
    ("Florist", "bouquet", "florist"),
    ("Clinic", "visit", "nurse"),
    ("Library", "book", "librarian"),
    ("Bank", "account", "teller"),
    ("Airport", "gate", "controller"),
    ("Farm", "field", "farmer"),
    ("Cafe", "order", "barista"),
    ("School", "course", "teacher"),
]
STATUSES = ["new", "active", "held", "closed"]


def _env_code(cls: str, item: str, staff: str, batch: bool, raises: bool) -> str:
    items, staffs = f"{item}s", f"{staff}s"
    refuse = (
        'raise KeyError(f"unknown {what} {key}")'
        if raises
        else 'return {"success": False, "error": f"{what} {key} does not exist"}'
    )
    code = f'''
from typing import Dict, List, TypedDict


class {item.capitalize()}Info(TypedDict):
    {item}_id: str
    status: str
    quantity: int
    {staff}_id: str
    note: str


class {cls}:
    """Generated environment: {items} handled by {staffs}."""

    def __init__(self, init_config: dict = None):
        init_config = init_config or {{}}
        self.{items}: Dict[str, {item.capitalize()}Info] = init_config.get("{items}", {{}})
        self.{staffs}: Dict[str, dict] = init_config.get("{staffs}", {{}})
        self.log: List[str] = []
        self.revision = 0

    def _missing(self, what, key):
        {refuse}

    def list_{items}(self) -> dict:
        """List every {item}."""
        return {{"success": True, "data": list(self.{items})}}

    def get_{item}(self, {item}_id: str) -> dict:
        """Get one {item}.

        Args:
            {item}_id (str): The {item} id.
        """
        if {item}_id not in self.{items}:
            return self._missing("{item}", {item}_id)
        return {{"success": True, "data": self.{items}[{item}_id]}}

    def set_status(self, {item}_id: str, status: str) -> dict:
        """Change the status of a {item}.

        Args:
            {item}_id (str): The {item} id.
            status (str): One of new, active, held, closed.
        """
        if {item}_id not in self.{items}:
            return self._missing("{item}", {item}_id)
        if status not in {STATUSES!r}:
            return {{"success": False, "error": f"invalid status {{status}}"}}
        self.{items}[{item}_id]["status"] = status
        return {{"success": True, "data": self.{items}[{item}_id]}}

    def assign(self, {item}_id: str, {staff}_id: str) -> dict:
        """Assign a {item} to a {staff}; the {staff}'s workload is counted.

        Args:
            {item}_id (str): The {item} id.
            {staff}_id (str): The {staff} id.
        """
        if {item}_id not in self.{items}:
            return self._missing("{item}", {item}_id)
        if {staff}_id not in self.{staffs}:
            return self._missing("{staff}", {staff}_id)
        self.{items}[{item}_id]["{staff}_id"] = {staff}_id
        self.{staffs}[{staff}_id]["load"] = self.{staffs}[{staff}_id].get("load", 0) + 1
        return {{"success": True, "data": {{"{item}_id": {item}_id, "{staff}_id": {staff}_id}}}}

    def restock(self, {item}_id: str, quantity: int, note: str) -> dict:
        """Add units to a {item}, with a note; the revision counter moves.

        Args:
            {item}_id (str): The {item} id.
            quantity (int): Units to add (positive).
            note (str): Why.
        """
        if {item}_id not in self.{items}:
            return self._missing("{item}", {item}_id)
        if not isinstance(quantity, int) or quantity <= 0:
            return {{"success": False, "error": "quantity must be a positive integer"}}
        rec = self.{items}[{item}_id]
        rec["quantity"] = rec["quantity"] + quantity
        rec["note"] = note
        self.revision += 1
        return {{"success": True, "data": rec}}
'''
    if batch:
        code += f'''
    def close_many(self, {item}_ids: list, {staff}_id: str) -> dict:
        """Close several {items} at once for a {staff}: each gets status closed and quantity 0; the {staff}'s
        workload and the revision move.

        Args:
            {item}_ids (list): The {item} ids.
            {staff}_id (str): The {staff} closing them.
        """
        if {staff}_id not in self.{staffs}:
            return self._missing("{staff}", {staff}_id)
        if not {item}_ids or len(set({item}_ids)) != len({item}_ids):
            return {{"success": False, "error": "{item}_ids must be a non-empty list without duplicates"}}
        for key in {item}_ids:
            if key not in self.{items}:
                return self._missing("{item}", key)
        for key in {item}_ids:
            self.{items}[key]["status"] = "closed"
            self.{items}[key]["quantity"] = 0
        self.{staffs}[{staff}_id]["load"] = self.{staffs}[{staff}_id].get("load", 0) + len({item}_ids)
        self.revision += 1
        return {{"success": True, "data": {{"closed": {item}_ids}}}}

    def open_many(self, {item}_ids: list) -> dict:
        """Reopen several {items}: each becomes active with a fresh note.

        Args:
            {item}_ids (list): The {item} ids.
        """
        if not {item}_ids or len(set({item}_ids)) != len({item}_ids):
            return {{"success": False, "error": "{item}_ids must be a non-empty list without duplicates"}}
        for key in {item}_ids:
            if key not in self.{items}:
                return self._missing("{item}", key)
        for key in {item}_ids:
            self.{items}[key]["status"] = "active"
            self.{items}[key]["note"] = "reopened"
        return {{"success": True, "data": {{"opened": {item}_ids}}}}
'''
    return code


def env_item(
    cls: str, code: str, tools: list[dict[str, Any]] | None = None, intro: str | None = None, rules: str = ""
) -> dict[str, Any]:
    """One environment item of the released ``*_env_metadata.json`` (no ``tools``: derived from the class)."""
    item: dict[str, Any] = {"env_class_name": cls, "env_class_code": code}
    if tools is not None:
        item["tools"] = tools
    return {**item, "environment_introduction": intro or cls, "constraints_rules": rules}


def _fn(name: str, description: str, props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": props, "required": required},
        },
    }


def _tools(item: str, staff: str, batch: bool) -> list[dict[str, Any]]:
    iid, sid = {"type": "string"}, {"type": "string"}
    tools = [
        _fn(f"list_{item}s", f"List every {item}.", {}, []),
        _fn(f"get_{item}", f"Get one {item}.", {f"{item}_id": iid}, [f"{item}_id"]),
        _fn(
            "set_status",
            f"Change the status of a {item}.",
            {f"{item}_id": iid, "status": {"type": "string", "enum": STATUSES}},
            [f"{item}_id", "status"],
        ),
        _fn(
            "assign",
            f"Assign a {item} to a {staff}.",
            {f"{item}_id": iid, f"{staff}_id": sid},
            [f"{item}_id", f"{staff}_id"],
        ),
        _fn(
            "restock",
            f"Add units to a {item}.",
            {f"{item}_id": iid, "quantity": {"type": "integer"}, "note": {"type": "string"}},
            [f"{item}_id", "quantity", "note"],
        ),
    ]
    if batch:
        tools += [
            _fn(
                "close_many",
                f"Close several {item}s.",
                {f"{item}_ids": {"type": "array", "items": {"type": "string"}}, f"{staff}_id": sid},
                [f"{item}_ids", f"{staff}_id"],
            ),
            _fn(
                "open_many",
                f"Reopen several {item}s.",
                {f"{item}_ids": {"type": "array", "items": {"type": "string"}}},
                [f"{item}_ids"],
            ),
        ]
    return tools


def _init_config(rng: random.Random, item: str, staff: str) -> dict[str, Any]:
    items = {
        f"{item[:2].upper()}{i:03d}": {
            f"{item}_id": f"{item[:2].upper()}{i:03d}",
            "status": rng.choice(STATUSES),
            "quantity": rng.randint(0, 30),
            f"{staff}_id": "",
            "note": "",
        }
        for i in range(1, rng.randint(7, 10))
    }
    staffs = {
        f"{staff[:2].upper()}{i:02d}": {"name": f"{staff} {i}", "load": rng.randint(0, 3)}
        for i in range(1, rng.randint(3, 5))
    }
    return {f"{item}s": items, f"{staff}s": staffs}


def generated_corpus(
    n_envs: int = 40, scenarios_per_env: int = 2, batch_every: int = 2, raise_every: int = 7, seed: int = 0
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``n_envs`` environments (every ``batch_every``-th with batch tools reaching |Δ| 7–13, every
    ``raise_every``-th refusing by raising) and ``scenarios_per_env`` scenarios each."""
    rng = random.Random(seed)
    items: dict[str, Any] = {}
    scenarios: list[dict[str, Any]] = []
    for i in range(n_envs):
        cls, item, staff = DOMAINS[i % len(DOMAINS)]
        cls = f"{cls}{i // len(DOMAINS) or ''}"
        env_id = f"env_{i:03d}_{cls.lower()}"
        batch = i % batch_every == 0
        items[env_id] = {
            "env_class_name": cls,
            "env_class_code": _env_code(cls, item, staff, batch, raises=(i % raise_every == 3)),
            "tools": _tools(item, staff, batch),
            "environment_introduction": f"A {cls} where {staff}s handle {item}s.",
            "constraints_rules": "Ids must exist; quantities are positive.",
        }
        for k in range(scenarios_per_env):
            scenarios.append(
                {
                    "task_id": f"{env_id}-task-{k}",
                    "env_id": env_id,
                    "env_class_name": cls,
                    "init_config": _init_config(rng, item, staff),
                    "task": f"Tidy up the {item}s of the {cls.lower()}.",
                }
            )
    return items, scenarios


STATUS_APIS = {
    "reminder_api": (
        "ReminderApi",
        '''
class ReminderApi:
    """Reminders on a phone (ACEBench style)."""

    def __init__(self, init_config=None):
        init_config = init_config or {}
        self.reminders = init_config.get("reminders", {1: {"title": "Dentist", "time": "2024-06-01 09:00", "done": \
False}})
        self.max_reminders = 6

    def view_reminders(self):
        """All reminders."""
        return {"status": True, "reminders": self.reminders}

    def add_reminder(self, title: str, time: str):
        """Add a reminder.

        Args:
            title (str): Title.
            time (str): When, as YYYY-MM-DD HH:MM.
        """
        if len(self.reminders) >= self.max_reminders:
            return {"status": False, "message": "Reminder list is full."}
        key = max(self.reminders, default=0) + 1
        self.reminders[key] = {"title": title, "time": time, "done": False}
        return {"status": True, "message": f"Reminder {key} added."}

    def complete_reminder(self, reminder_id: int):
        """Mark a reminder done.

        Args:
            reminder_id (int): The reminder id.
        """
        if reminder_id not in self.reminders:
            return {"status": False, "message": "Reminder ID does not exist."}
        self.reminders[reminder_id]["done"] = True
        return {"status": True, "message": "Reminder completed."}

    def delete_reminder(self, reminder_id: int):
        """Delete a reminder.

        Args:
            reminder_id (int): The reminder id.
        """
        if reminder_id not in self.reminders:
            return {"status": False, "message": "Reminder ID does not exist."}
        del self.reminders[reminder_id]
        return {"status": True, "message": "Reminder deleted."}
''',
        [
            _fn("view_reminders", "All reminders.", {}, []),
            _fn(
                "add_reminder",
                "Add a reminder.",
                {"title": {"type": "string"}, "time": {"type": "string"}},
                ["title", "time"],
            ),
            _fn("complete_reminder", "Mark a reminder done.", {"reminder_id": {"type": "integer"}}, ["reminder_id"]),
            _fn("delete_reminder", "Delete a reminder.", {"reminder_id": {"type": "integer"}}, ["reminder_id"]),
        ],
    ),
    "message_api": (
        "MessageApi",
        '''
class MessageApi:
    """Text messages (ACEBench style: integer inbox keys, bare data answers)."""

    def __init__(self, init_config=None):
        init_config = init_config or {}
        self.inbox = init_config.get("inbox", {1: {"sender": "Eve", "text": "hi", "read": False}})
        self.contacts = init_config.get("contacts", ["Eve", "Frank"])
        self.sent = 0

    def list_messages(self):
        """Inbox messages."""
        return self.inbox

    def send_message(self, receiver: str, text: str):
        """Send a message to a contact.

        Args:
            receiver (str): Contact name.
            text (str): Message text.
        """
        if receiver not in self.contacts:
            return {"status": False, "message": f"{receiver} is not a contact."}
        self.sent += 1
        return {"status": True, "message": "Message sent."}

    def mark_read(self, message_id: int):
        """Mark a message read.

        Args:
            message_id (int): The message id.
        """
        if message_id not in self.inbox:
            return {"status": False, "message": "Message ID does not exist."}
        self.inbox[message_id]["read"] = True
        return {"status": True}

    def delete_message(self, message_id: int):
        """Delete a message.

        Args:
            message_id (int): The message id.
        """
        if message_id not in self.inbox:
            return {"status": False, "message": "Message ID does not exist."}
        del self.inbox[message_id]
        return {"status": True, "message": "Message deleted."}
''',
        [
            _fn("list_messages", "Inbox messages.", {}, []),
            _fn(
                "send_message",
                "Send a message.",
                {"receiver": {"type": "string"}, "text": {"type": "string"}},
                ["receiver", "text"],
            ),
            _fn("mark_read", "Mark a message read.", {"message_id": {"type": "integer"}}, ["message_id"]),
            _fn("delete_message", "Delete a message.", {"message_id": {"type": "integer"}}, ["message_id"]),
        ],
    ),
    "flight_api": (
        "FlightApi",
        '''
class FlightApi:
    """Flight booking (ACEBench style)."""

    def __init__(self, init_config=None):
        init_config = init_config or {}
        self.flights = init_config.get("flights", {"CA123": {"seats": 3, "price": 500}, "MU456": {"seats": 0, \
"price": 420}})
        self.balance = init_config.get("balance", 1000)
        self.bookings = init_config.get("bookings", {})

    def get_flight(self, flight_no: str):
        """Flight details.

        Args:
            flight_no (str): Flight number.
        """
        if flight_no not in self.flights:
            return {"status": False, "message": "Flight does not exist."}
        return self.flights[flight_no]

    def reserve_flight(self, flight_no: str, passenger: str):
        """Reserve a seat: one seat fewer, the price paid, a booking made.

        Args:
            flight_no (str): Flight number.
            passenger (str): Passenger name.
        """
        if flight_no not in self.flights:
            return {"status": False, "message": "Flight does not exist."}
        flight = self.flights[flight_no]
        if flight["seats"] < 1:
            return {"status": False, "message": "No seats left."}
        if self.balance < flight["price"]:
            return {"status": False, "message": "Insufficient balance."}
        flight["seats"] -= 1
        self.balance -= flight["price"]
        self.bookings[passenger] = flight_no
        return {"status": True, "message": "Booked."}

    def cancel_booking(self, passenger: str):
        """Cancel a passenger's booking (refund, seat back).

        Args:
            passenger (str): Passenger name.
        """
        if passenger not in self.bookings:
            return {"status": False, "message": "No booking for this passenger."}
        flight = self.flights[self.bookings.pop(passenger)]
        flight["seats"] += 1
        self.balance += flight["price"]
        return {"status": True, "message": "Cancelled."}
''',
        [
            _fn("get_flight", "Flight details.", {"flight_no": {"type": "string"}}, ["flight_no"]),
            _fn(
                "reserve_flight",
                "Reserve a seat.",
                {"flight_no": {"type": "string"}, "passenger": {"type": "string"}},
                ["flight_no", "passenger"],
            ),
            _fn("cancel_booking", "Cancel a booking.", {"passenger": {"type": "string"}}, ["passenger"]),
        ],
    ),
    "food_api": (
        "FoodApi",
        '''
class FoodApi:
    """Food delivery (ACEBench style)."""

    def __init__(self, init_config=None):
        init_config = init_config or {}
        self.menu = init_config.get("menu", {"noodles": 12, "rice": 9, "soup": 7})
        self.cart = init_config.get("cart", {})
        self.orders = init_config.get("orders", [])

    def view_menu(self):
        """The menu."""
        return self.menu

    def add_to_cart(self, dish: str, count: int):
        """Put dishes in the cart.

        Args:
            dish (str): Dish name.
            count (int): How many.
        """
        if dish not in self.menu:
            return {"status": False, "message": "Dish not on the menu."}
        if count < 1:
            return {"status": False, "message": "Count must be positive."}
        self.cart[dish] = self.cart.get(dish, 0) + count
        return {"status": True, "cart": self.cart}

    def place_order(self):
        """Order the cart."""
        if not self.cart:
            return {"status": False, "message": "Cart is empty."}
        self.orders = self.orders + [dict(self.cart)]
        self.cart = {}
        return {"status": True, "message": "Order placed."}
''',
        [
            _fn("view_menu", "The menu.", {}, []),
            _fn(
                "add_to_cart",
                "Put dishes in the cart.",
                {"dish": {"type": "string"}, "count": {"type": "integer"}},
                ["dish", "count"],
            ),
            _fn("place_order", "Order the cart.", {}, []),
        ],
    ),
    "device_api": (
        "DeviceApi",
        '''
class DeviceApi:
    """Phone settings (ACEBench style)."""

    def __init__(self, init_config=None):
        init_config = init_config or {}
        self.wifi = init_config.get("wifi", False)
        self.volume = init_config.get("volume", 5)
        self.logged_in = init_config.get("logged_in", True)

    def turn_on_wifi(self):
        """Turn wifi on."""
        if self.wifi:
            return {"status": False, "message": "Wifi is already on."}
        self.wifi = True
        return {"status": True, "message": "Wifi on."}

    def set_volume(self, level: int):
        """Set the volume.

        Args:
            level (int): 0 to 10.
        """
        if not 0 <= level <= 10:
            return {"status": False, "message": "Volume must be between 0 and 10."}
        self.volume = level
        return {"status": True, "message": f"Volume {level}."}

    def log_out(self):
        """Log out."""
        if not self.logged_in:
            return {"status": False, "message": "Not logged in."}
        self.logged_in = False
        return {"status": True, "message": "Logged out."}
''',
        [
            _fn("turn_on_wifi", "Turn wifi on.", {}, []),
            _fn("set_volume", "Set the volume.", {"level": {"type": "integer"}}, ["level"]),
            _fn("log_out", "Log out.", {}, []),
        ],
    ),
}


def status_corpus() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Five ACEBench-style environments, refusals as ``{"status": False, "message": ...}``, |Δ| ≤ 3."""
    items = {env_id: env_item(cls, code, tools) for env_id, (cls, code, tools) in STATUS_APIS.items()}
    scenarios = [
        {
            "task_id": f"{env_id}-{k}",
            "env_id": env_id,
            "env_class_name": cls,
            "init_config": {},
            "task": f"Use the {cls}.",
        }
        for env_id, (cls, _, _) in STATUS_APIS.items()
        for k in range(3)
    ]
    return items, scenarios


TINY = {
    "notes": (
        "Notes",
        '''
class Notes:
    """A notebook."""

    def __init__(self, init_config=None):
        self.notes = (init_config or {}).get("notes", {"n1": {"text": "milk", "pinned": False}})

    def list_notes(self):
        """Every note."""
        return {"success": True, "data": self.notes}

    def pin_note(self, note_id: str):
        """Pin a note.

        Args:
            note_id (str): The note id.
        """
        if note_id not in self.notes:
            return {"success": False, "error": "no such note"}
        self.notes[note_id]["pinned"] = True
        return {"success": True}

    def edit_note(self, note_id: str, text: str):
        """Change a note's text and unpin it.

        Args:
            note_id (str): The note id.
            text (str): New text.
        """
        if note_id not in self.notes:
            return {"success": False, "error": "no such note"}
        self.notes[note_id].update(text=text, pinned=False)
        return {"success": True}
''',
        [
            _fn("list_notes", "Every note.", {}, []),
            _fn("pin_note", "Pin a note.", {"note_id": {"type": "string"}}, ["note_id"]),
            _fn(
                "edit_note",
                "Edit a note.",
                {"note_id": {"type": "string"}, "text": {"type": "string"}},
                ["note_id", "text"],
            ),
        ],
    ),
    "thermostat": (
        "Thermostat",
        '''
class Thermostat:
    """A thermostat."""

    def __init__(self, init_config=None):
        self.target = (init_config or {}).get("target", 20)
        self.mode = (init_config or {}).get("mode", "heat")

    def read(self):
        """Target and mode."""
        return {"success": True, "data": {"target": self.target, "mode": self.mode}}

    def set_target(self, degrees: int):
        """Set the target temperature.

        Args:
            degrees (int): 10 to 30.
        """
        if not 10 <= degrees <= 30:
            return {"success": False, "error": "out of range"}
        self.target = degrees
        return {"success": True}
''',
        [
            _fn("read", "Target and mode.", {}, []),
            _fn("set_target", "Set the target.", {"degrees": {"type": "integer"}}, ["degrees"]),
        ],
    ),
    "counter": (
        "Counter",
        '''
class Counter:
    """Two counters."""

    def __init__(self, init_config=None):
        self.a = (init_config or {}).get("a", 0)
        self.b = (init_config or {}).get("b", 0)

    def bump(self, which: str):
        """Add one to a counter.

        Args:
            which (str): a or b.
        """
        if which not in ("a", "b"):
            return {"success": False, "error": "unknown counter"}
        setattr(self, which, getattr(self, which) + 1)
        return {"success": True}

    def reset_both(self):
        """Both counters to zero."""
        self.a, self.b = 0, 0
        return {"success": True}
''',
        [_fn("bump", "Add one.", {"which": {"type": "string"}}, ["which"]), _fn("reset_both", "Both to zero.", {}, [])],
    ),
}


def tiny_corpus() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    items = {env_id: env_item(cls, code, tools) for env_id, (cls, code, tools) in TINY.items()}
    scenarios = [
        {"task_id": f"{env_id}-0", "env_id": env_id, "env_class_name": cls, "init_config": {}, "task": cls}
        for env_id, (cls, _, _) in TINY.items()
    ]
    return items, scenarios


def write_released(
    directory: Path, items: dict[str, Any], scenarios: list[dict[str, Any]], env_name: str = "191_env_metadata.json"
) -> tuple[Path, Path]:
    """``items`` and ``scenarios`` as the released files (``env_name`` + ``scenarios.json``) under ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    env_file, scen_file = directory / env_name, directory / "scenarios.json"
    env_file.write_text(json.dumps(items, indent=1))
    scen_file.write_text(json.dumps(scenarios, indent=1))
    return env_file, scen_file


def write_generated_corpus(directory: Path, **kwargs: Any) -> tuple[Path, Path]:
    return write_released(directory, *generated_corpus(**kwargs))


def write_status_corpus(directory: Path) -> tuple[Path, Path]:
    return write_released(directory, *status_corpus())


def write_tiny_corpus(directory: Path) -> tuple[Path, Path]:
    return write_released(directory, *tiny_corpus())


def run_config(env_file: Path, scen_file: Path, **ops: Any) -> dict[str, Any]:
    """A ``./forge run -c`` config that runs only this corpus (no bfcl, no builtin pack)."""
    config: dict[str, Any] = {
        "resources": {
            "sources": {
                "config": {
                    "builtin": {"enabled": False},
                    "bfcl": {"categories": []},
                    "envscaler": [{"env_items": str(env_file), "scenarios": str(scen_file), "license": "test corpus"}],
                }
            }
        }
    }
    if ops:
        config["ops"] = ops
    return config


def forge_run(
    where: Path, config: dict[str, Any], timeout: int = 1800
) -> tuple[subprocess.CompletedProcess, DataLayout]:
    """``./forge run -c`` with the run config ``config`` (written to ``where/run.yaml``), on a data root and a Dagster
    home of their own under ``where``, the caller's ``ENVSIM_*`` variables left out."""
    path = where / "run.yaml"
    path.write_text(yaml.safe_dump(config))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENVSIM_")}
    env.update(DAGSTER_HOME=str(where / "home"), ENVSIM_DATA_ROOT=str(where / "data"))
    command = ["./forge", "run", "-c", str(path)]
    proc = subprocess.run(command, cwd=PROJECT, env=env, capture_output=True, text=True, timeout=timeout)
    return proc, DataLayout.at(where / "data")
