"""Small corpora in EnvScaler's released format whose environments refuse calls in conventions of their own.

* ``codes``: three environments that answer ``{"code": 200, "data": ...}`` and refuse with
  ``{"code": 404, "msg": ...}`` / ``{"code": 400, "msg": ...}``, or with a text starting "Sorry" — a
  convention the default outcome rule does not know (nothing says ``success``, ``status`` or ``error``);
* ``acebench``: one ACEBench-style environment (phone reminders) that answers ``{"status": True, ...}``
  and refuses with ``{"status": False, "message": "Reminder ID does not exist."}``, and whose listing
  is a bare dict of data with no status at all.

No call changes more than 3 fields (|Δ| ≤ 3), as in ACEBench.
"""

from pathlib import Path

from tests.support.user_corpora import env_item, write_released

PARKING = '''
class ParkingLot:
    """Parking spots, each free (None) or holding a plate."""

    def __init__(self, init_config):
        self.spots = dict(init_config.get("spots", {}))
        self.fees = init_config.get("fees", 0)

    def reserve(self, spot_id: str, plate: str):
        """Reserve a free spot for a car.

        Args:
            spot_id (str): The spot.
            plate (str): The car's plate.
        """
        if spot_id not in self.spots:
            return {"code": 404, "msg": f"spot {spot_id} not found"}
        if self.spots[spot_id] is not None:
            return {"code": 400, "msg": f"spot {spot_id} is taken"}
        self.spots[spot_id] = plate
        self.fees += 5
        return {"code": 200, "data": {"spot": spot_id, "plate": plate}}

    def release(self, spot_id: str):
        """Free a spot.

        Args:
            spot_id (str): The spot.
        """
        if spot_id not in self.spots:
            return {"code": 404, "msg": f"spot {spot_id} not found"}
        if self.spots[spot_id] is None:
            return {"code": 400, "msg": f"spot {spot_id} is already free"}
        self.spots[spot_id] = None
        return {"code": 200, "data": {"spot": spot_id}}

    def free_spots(self):
        """List the free spots."""
        return {"code": 200, "data": sorted(k for k, v in self.spots.items() if v is None)}
'''

PANTRY = '''
class Pantry:
    """Shelves of items with counts."""

    def __init__(self, init_config):
        self.items = dict(init_config.get("items", {}))

    def take(self, item: str, count: int):
        """Take some units of an item.

        Args:
            item (str): The item.
            count (int): How many.
        """
        if item not in self.items:
            return {"code": 404, "msg": f"no {item} in the pantry"}
        if count <= 0 or count > self.items[item]:
            return {"code": 400, "msg": f"cannot take {count} {item}"}
        self.items[item] -= count
        return {"code": 200, "data": {"item": item, "left": self.items[item]}}

    def restock(self, item: str, count: int):
        """Add units of an item.

        Args:
            item (str): The item.
            count (int): How many.
        """
        if count <= 0:
            return {"code": 400, "msg": "count must be positive"}
        self.items[item] = self.items.get(item, 0) + count
        return {"code": 200, "data": {"item": item, "left": self.items[item]}}

    def stock(self):
        """Every item and its count."""
        return {"code": 200, "data": dict(self.items)}
'''

SHELF = '''
class BookShelf:
    """Books to lend; answers in sentences."""

    def __init__(self, init_config):
        self.books = dict(init_config.get("books", {}))
        self.loans = dict(init_config.get("loans", {}))

    def lend(self, title: str, reader: str):
        """Lend a book to a reader.

        Args:
            title (str): The book.
            reader (str): Who borrows it.
        """
        if self.books.get(title, 0) < 1:
            return f"Sorry, {title} is not available."
        self.books[title] -= 1
        self.loans[title + "/" + reader] = True
        return f"Lent {title} to {reader}."

    def give_back(self, title: str, reader: str):
        """Return a lent book.

        Args:
            title (str): The book.
            reader (str): Who borrowed it.
        """
        if title + "/" + reader not in self.loans:
            return f"Sorry, {reader} has not borrowed {title}."
        del self.loans[title + "/" + reader]
        self.books[title] = self.books.get(title, 0) + 1
        return f"{title} is back on the shelf."

    def catalogue(self):
        """The books and how many copies are on the shelf."""
        return dict(self.books)
'''

REMINDERS = '''
class ReminderApp:
    """A phone's reminders (ACEBench style)."""

    def __init__(self, init_config):
        self.reminders = dict(init_config.get("reminders", {}))
        self.next_id = init_config.get("next_id", 1)

    def add_reminder(self, title: str, time: str):
        """Add a reminder.

        Args:
            title (str): What to remind of.
            time (str): When, as YYYY-MM-DD HH:MM.
        """
        if not title:
            return {"status": False, "message": "The title is empty."}
        reminder_id = str(self.next_id)
        self.next_id += 1
        self.reminders[reminder_id] = {"title": title, "time": time}
        return {"status": True, "message": f"Reminder {reminder_id} added."}

    def delete_reminder(self, reminder_id: str):
        """Delete a reminder.

        Args:
            reminder_id (str): The reminder.
        """
        if reminder_id not in self.reminders:
            return {"status": False, "message": "Reminder ID does not exist."}
        del self.reminders[reminder_id]
        return {"status": True, "message": "Reminder deleted."}

    def view_reminders(self):
        """Every reminder."""
        return dict(self.reminders)
'''


CODES_ITEMS = {
    "parking": env_item("ParkingLot", PARKING, intro="A parking lot."),
    "pantry": env_item("Pantry", PANTRY, intro="A pantry."),
    "shelf": env_item("BookShelf", SHELF, intro="A book shelf."),
}
CODES_SCENARIOS = [
    {
        "task_id": "park-1",
        "env_id": "parking",
        "init_config": {"spots": {"A1": None, "A2": "XY-1", "B1": None}, "fees": 0},
        "task": "Park a car.",
    },
    {"task_id": "pantry-1", "env_id": "pantry", "init_config": {"items": {"rice": 3, "beans": 1}}, "task": "Cook."},
    {
        "task_id": "shelf-1",
        "env_id": "shelf",
        "init_config": {"books": {"Dune": 1, "Emma": 0}, "loans": {"Emma/ann": True}},
        "task": "Borrow a book.",
    },
]
ACEBENCH_ITEMS = {"reminders": env_item("ReminderApp", REMINDERS, intro="Phone reminders.")}
ACEBENCH_SCENARIOS = [
    {
        "task_id": "rem-1",
        "env_id": "reminders",
        "init_config": {"reminders": {"1": {"title": "dentist", "time": "2024-06-01 09:00"}}, "next_id": 2},
        "task": "Tidy the reminders.",
    },
]

#: the ``codes`` corpus's convention, declared
CODES_RULE = {"failure_if": [{"key": "code", "in": [400, 404]}, {"text_starts_with": "Sorry"}], "extends_default": True}


def write(directory: Path, items: dict, scenarios: list) -> tuple[Path, Path]:
    return write_released(directory, items, scenarios, "env_metadata.json")
