"""A benign corpus (issue 40 item 6): the patterns LLM-written environments use, in EnvScaler's released format.

Each environment is ordinary generated code of one pattern — a logger kept on the instance after
``logging.basicConfig``, ``queue.Queue``, locks, events, anonymous temp files, dataclasses and ``dataclasses.replace``,
enums, ``lru_cache`` / ``cached_property``, decimal contexts, regex caches, datetime arithmetic, generators, context
managers, ``__slots__``, properties, class-level registries, an ``OrderedDict`` LRU, ``heapq``, deep recursion, a 1 MB
state, sets of strings… — with tools derived from its signatures and docstrings, and two scenarios (EnvScaler sets
every init-config key as an attribute, so the configs name keys the classes read, not their attributes). None of it is
nondeterministic: run by the pipeline none may be quarantined, and every label must equal what plain Python gives.

:data:`PATTERNS` depend on nothing of the sandbox — among them what the language runtime needs (threads, a thread pool,
timers, ``asyncio.run``, ``shutil`` copies, ``os.chmod``/``utime``, ``shelve``/``dbm.dumb``, sqlite in WAL mode,
``shutil.disk_usage``, ``getpass.getuser``, ``socket.gethostbyname("localhost")``, ``mimetypes``,
``os.sysconf("SC_PHYS_PAGES")``, numpy, ``zoneinfo`` conversions, pandas, SQLite's JSON functions);
:data:`REFUSED_PATTERNS` do what the sandbox refuses by design (a new process): their calls are ``sandbox_refused``
steps naming the syscall; :data:`DIR_PATTERNS` store the working directory or temp-file paths (``os.getcwd()``,
``tempfile.gettempdir()``, a ``mkstemp`` path), so they are deterministic only where the sandbox's
per-trajectory directory names are (issue 40 item 6, first part).

:func:`plain_labels` is the oracle: the same environments built and called in this process, as EnvScaler does (a fresh
module per trajectory, ``cls(init_config)`` else ``cls()``, config keys set as attributes, ``str`` of the return value,
``vars`` minus dunders), with no sandbox. Run it in a fresh interpreter with ``PYTHONHASHSEED=0`` (the sandbox's seed:
``str`` of a set of strings depends on it) — ``python -m tests.support.benign_corpus`` reads the trajectories as JSON on
stdin and writes their labels as JSON on stdout, so ``logging.basicConfig`` and friends touch that process only.
"""

from __future__ import annotations

import copy
import json
import sys
import types
from pathlib import Path
from typing import Any

#: name -> (class name, class code, the init configs of its two scenarios)
Pattern = tuple[str, str, list[dict[str, Any]]]

PATTERNS: dict[str, Pattern] = {}
DIR_PATTERNS: dict[str, Pattern] = {}


def _pattern(name: str, cls: str, configs: list[dict[str, Any]], table: dict[str, Pattern] = PATTERNS):
    def add(code: str) -> str:
        table[name] = (cls, code, configs)
        return code

    return add


_pattern("logging_basicconfig", "OrderDesk", [{"orders": {"o1": "new"}}, {"orders": {}}])(
    """
import logging

logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s %(message)s")


class OrderDesk:
    def __init__(self, init_config):
        self.orders = dict(init_config.get("orders", {}))
        self.logger = logging.getLogger("order_desk")
        self.logger.setLevel(logging.INFO)
        self.audit = logging.getLogger("order_desk.audit")

    def place_order(self, order_id: str):
        \"\"\"Place an order.

        Args:
            order_id (str): The order id.
        \"\"\"
        if order_id in self.orders:
            self.logger.warning("duplicate order %s", order_id)
            return {"success": False, "error": f"order {order_id} exists"}
        self.orders[order_id] = "new"
        self.logger.info("placed %s", order_id)
        return {"success": True, "data": {"order_id": order_id}}

    def set_verbosity(self, level: str):
        \"\"\"Change the log level.

        Args:
            level (str): One of DEBUG, INFO or WARNING.
        \"\"\"
        if level not in ("DEBUG", "INFO", "WARNING"):
            return {"success": False, "error": "bad level"}
        self.logger.setLevel(level)
        self.audit.debug("level %s", level)
        return {"success": True, "data": {"level": self.logger.getEffectiveLevel()}}
"""
)

_pattern("queue_jobs", "PrintQueue", [{"jobs": ["a", "b"]}, {"jobs": []}])(
    """
import queue


class PrintQueue:
    def __init__(self, init_config):
        self.pending = queue.Queue(maxsize=10)
        for job in init_config.get("jobs", []):
            self.pending.put(job)
        self.urgent = queue.PriorityQueue()
        self.done = []

    def submit(self, job: str, priority: int):
        \"\"\"Queue a print job.

        Args:
            job (str): Job name.
            priority (int): Lower runs first.
        \"\"\"
        if self.pending.full():
            return {"success": False, "error": "queue full"}
        self.pending.put(job)
        self.urgent.put((priority, job))
        return {"success": True, "data": {"queued": self.pending.qsize()}}

    def print_next(self):
        \"\"\"Print the next job.\"\"\"
        try:
            job = self.pending.get_nowait()
        except queue.Empty:
            return {"success": False, "error": "nothing queued"}
        self.pending.task_done()
        self.done.append(job)
        return {"success": True, "data": {"printed": job, "left": self.pending.qsize()}}
"""
)

_pattern("threading_locks", "Ledger", [{"balance": 100}, {"balance": 5}])(
    """
import threading


class Ledger:
    def __init__(self, init_config):
        self.balance = init_config.get("balance", 0)
        self.lock = threading.Lock()
        self.reentrant = threading.RLock()
        self._guard = threading.Lock()
        self.entries = []

    def _apply(self, amount):
        with self.reentrant:
            self.balance += amount
            self.entries.append(amount)

    def deposit(self, amount: int):
        \"\"\"Deposit money.

        Args:
            amount (int): Amount to add.
        \"\"\"
        if amount <= 0:
            return {"success": False, "error": "amount must be positive"}
        with self.lock, self.reentrant:
            self._apply(amount)
        return {"success": True, "data": {"balance": self.balance}}

    def withdraw(self, amount: int):
        \"\"\"Withdraw money.

        Args:
            amount (int): Amount to take.
        \"\"\"
        with self._guard:
            if amount > self.balance:
                return {"success": False, "error": "insufficient funds"}
            self._apply(-amount)
        return {"success": True, "data": {"balance": self.balance, "locked": self.lock.locked()}}
"""
)

_pattern("condition_event", "Gate", [{"capacity": 2}, {"capacity": 1}])(
    """
import threading


class Gate:
    def __init__(self, init_config):
        self.capacity = init_config.get("capacity", 1)
        self.opened = threading.Event()
        self.changed = threading.Condition()
        self.slots = threading.BoundedSemaphore(self.capacity)
        self.inside = []

    def open_gate(self):
        \"\"\"Open the gate.\"\"\"
        with self.changed:
            self.opened.set()
            self.changed.notify_all()
        return {"success": True, "data": {"open": self.opened.is_set()}}

    def enter(self, visitor: str):
        \"\"\"Let a visitor in.

        Args:
            visitor (str): Visitor name.
        \"\"\"
        if not self.opened.is_set():
            return {"success": False, "error": "gate closed"}
        if not self.slots.acquire(blocking=False):
            return {"success": False, "error": "full"}
        self.inside.append(visitor)
        return {"success": True, "data": {"inside": len(self.inside)}}

    def close_gate(self):
        \"\"\"Close the gate.\"\"\"
        self.opened.clear()
        return {"success": True, "data": {"open": False}}
"""
)

_pattern("tempfile_anonymous", "ReportSpool", [{"title": "Q1"}, {"title": "Q2"}])(
    """
import io
import tempfile


class ReportSpool:
    def __init__(self, init_config):
        self.title = init_config.get("title", "report")
        self.lines = []
        self.sizes = []

    def add_line(self, text: str):
        \"\"\"Add a line to the report.

        Args:
            text (str): The line.
        \"\"\"
        self.lines.append(text)
        return {"success": True, "data": {"lines": len(self.lines)}}

    def render(self):
        \"\"\"Render the report through a temporary file and read it back.\"\"\"
        with tempfile.TemporaryFile(mode="w+") as handle:
            handle.write(self.title + "\\n" + "\\n".join(self.lines))
            handle.seek(0)
            text = handle.read()
        with tempfile.SpooledTemporaryFile(max_size=64, mode="w+b") as spool:
            spool.write(text.encode() * 20)
            spool.seek(0, io.SEEK_END)
            size = spool.tell()
        self.sizes.append(size)
        return {"success": True, "data": {"text": text, "bytes": size}}
"""
)

_pattern("dataclass_replace", "Catalog", [{"items": {"p1": 3}}, {"items": {}}])(
    """
import dataclasses
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Product:
    sku: str
    stock: int = 0
    tags: tuple = ()


@dataclass
class History:
    events: list = field(default_factory=list)


class Catalog:
    def __init__(self, init_config):
        self.products = {k: Product(k, v) for k, v in init_config.get("items", {}).items()}
        self.history = History()

    def restock(self, sku: str, units: int):
        \"\"\"Add stock to a product (created when new).

        Args:
            sku (str): Product id.
            units (int): Units added.
        \"\"\"
        old = self.products.get(sku, Product(sku))
        new = dataclasses.replace(old, stock=old.stock + units, tags=old.tags + ("restocked",))
        self.products[sku] = new
        self.history.events.append(dataclasses.asdict(new))
        return {"success": True, "data": dataclasses.asdict(new)}

    def fields_of(self):
        \"\"\"Names of the product fields.\"\"\"
        return {"success": True, "data": [f.name for f in dataclasses.fields(Product)]}
"""
)

_pattern("enum_states", "Tickets", [{"tickets": ["t1", "t2"]}, {"tickets": ["t9"]}])(
    """
import enum


class Status(enum.Enum):
    OPEN = "open"
    IN_PROGRESS = "in_progress"
    CLOSED = "closed"


class Priority(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Tickets:
    TRANSITIONS = {Status.OPEN: {Status.IN_PROGRESS, Status.CLOSED}, Status.IN_PROGRESS: {Status.CLOSED}}

    def __init__(self, init_config):
        self.status = {t: Status.OPEN for t in init_config.get("tickets", [])}
        self.priority = {t: Priority.LOW for t in self.status}

    def move(self, ticket: str, status: str):
        \"\"\"Move a ticket to a status.

        Args:
            ticket (str): Ticket id.
            status (str): One of open, in_progress or closed.
        \"\"\"
        if ticket not in self.status:
            return {"success": False, "error": "no such ticket"}
        target = Status(status)
        if target not in self.TRANSITIONS.get(self.status[ticket], set()):
            return {"success": False, "error": f"cannot go from {self.status[ticket].name} to {target.name}"}
        self.status[ticket] = target
        return {"success": True, "data": {"ticket": ticket, "status": target.value}}

    def escalate(self, ticket: str):
        \"\"\"Raise a ticket's priority.

        Args:
            ticket (str): Ticket id.
        \"\"\"
        self.priority[ticket] = Priority.HIGH
        return {"success": True, "data": {"priority": int(self.priority[ticket]), "name": Priority.HIGH.name}}
"""
)

_pattern("lru_cache_functions", "TaxDesk", [{"rates": {"food": 5, "tech": 20}}, {"rates": {"food": 7}}])(
    """
import functools


@functools.lru_cache(maxsize=128)
def rate_table(region):
    return tuple((i, i * 1.5) for i in range(len(region)))


@functools.cache
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


class TaxDesk:
    def __init__(self, init_config):
        self.rates = dict(init_config.get("rates", {}))
        self.quotes = []

    @functools.lru_cache(maxsize=None)
    def _rate(self, category):
        return self.rates.get(category, 10)

    def quote(self, category: str, amount: int):
        \"\"\"Tax for an amount.

        Args:
            category (str): Product category.
            amount (int): Net amount.
        \"\"\"
        tax = amount * self._rate(category) // 100
        self.quotes.append(tax)
        return {"success": True, "data": {"tax": tax, "table": len(rate_table(category)), "fib": fib(min(amount, 80))}}

    def cache_info(self):
        \"\"\"How the caches did.\"\"\"
        info = rate_table.cache_info()
        return {"success": True, "data": {"hits": info.hits, "misses": info.misses}}
"""
)

_pattern("cached_property_and_property", "Menu", [{"dishes": {"soup": 4, "pie": 6}}, {"dishes": {"tea": 2}}])(
    """
from functools import cached_property


class Menu:
    def __init__(self, init_config):
        self.dishes = dict(init_config.get("dishes", {}))
        self._discount = 0

    @cached_property
    def price_index(self):
        return sorted(self.dishes.items(), key=lambda kv: (kv[1], kv[0]))

    @property
    def discount(self):
        return self._discount

    @discount.setter
    def discount(self, value):
        if not 0 <= value <= 50:
            raise ValueError("discount must be 0-50")
        self._discount = value

    def cheapest(self):
        \"\"\"The cheapest dish.\"\"\"
        if not self.price_index:
            return {"success": False, "error": "empty menu"}
        name, price = self.price_index[0]
        return {"success": True, "data": {"dish": name, "price": price * (100 - self.discount) // 100}}

    def set_discount(self, percent: int):
        \"\"\"Set the discount.

        Args:
            percent (int): Percent off.
        \"\"\"
        self.discount = percent
        return {"success": True, "data": {"discount": self.discount}}
"""
)

_pattern("decimal_context", "Wallet", [{"opening_balance": "10.00"}, {"opening_balance": "0.10"}])(
    """
import decimal
from decimal import ROUND_HALF_UP, Decimal


class Wallet:
    def __init__(self, init_config):
        self.balance = Decimal(init_config.get("opening_balance", "0"))
        self.context = decimal.Context(prec=12, rounding=ROUND_HALF_UP)
        self.fx = {"EUR": Decimal("0.9134"), "GBP": Decimal("0.7861")}

    def convert(self, currency: str, amount: int):
        \"\"\"Convert an amount into a currency.

        Args:
            currency (str): One of EUR or GBP.
            amount (int): Amount in dollars.
        \"\"\"
        if currency not in self.fx:
            return {"success": False, "error": "unknown currency"}
        with decimal.localcontext(self.context) as ctx:
            ctx.prec = 6
            value = (Decimal(amount) * self.fx[currency]).quantize(Decimal("0.01"))
        return {"success": True, "data": {"value": str(value)}}

    def charge(self, amount: int):
        \"\"\"Charge the wallet in cents.

        Args:
            amount (int): Cents.
        \"\"\"
        cost = self.context.divide(Decimal(amount), Decimal(100))
        if cost > self.balance:
            return {"success": False, "error": "insufficient"}
        self.balance = self.context.subtract(self.balance, cost)
        return {"success": True, "data": {"balance": self.balance}}
"""
)

_pattern("regex_cache", "Signup", [{"users": {"ann@example.com": "ann"}}, {"users": {}}])(
    """
import re

_PATTERNS = {}


def _compiled(name, source):
    if name not in _PATTERNS:
        _PATTERNS[name] = re.compile(source, re.IGNORECASE)
    return _PATTERNS[name]


class Signup:
    EMAIL = re.compile(r"^[\\w.+-]+@[\\w-]+\\.[\\w.]+$")

    def __init__(self, init_config):
        self.users = dict(init_config.get("users", {}))
        self.validators = {"handle": re.compile(r"^[a-z][a-z0-9_]{2,15}$")}

    def register(self, email: str, handle: str):
        \"\"\"Register a user.

        Args:
            email (str): Email address.
            handle (str): Handle.
        \"\"\"
        if not self.EMAIL.match(email):
            return {"success": False, "error": f"invalid email {email!r}"}
        if not self.validators["handle"].fullmatch(handle):
            return {"success": False, "error": "invalid handle"}
        self.users[email] = handle
        return {"success": True, "data": {"users": len(self.users)}}

    def search(self, text: str):
        \"\"\"Find users whose handle contains a text.

        Args:
            text (str): Text to look for.
        \"\"\"
        pattern = _compiled(text, re.escape(text))
        found = sorted(h for h in self.users.values() if pattern.search(h))
        return {"success": True, "data": found, "cached": len(_PATTERNS)}
"""
)

_pattern("datetime_arithmetic", "RoomBook", [{"start_iso": "2025-03-01T09:00"}, {"start_iso": "2024-12-30T23:30"}])(
    """
from datetime import date, datetime, timedelta, timezone


class RoomBook:
    def __init__(self, init_config):
        self.start = datetime.fromisoformat(init_config.get("start_iso", "2025-01-01T00:00:00"))
        self.slot = timedelta(minutes=45)
        self.bookings = {}

    def book(self, room: str, slots: int):
        \"\"\"Book a room for some slots.

        Args:
            room (str): Room name.
            slots (int): Number of 45-minute slots.
        \"\"\"
        begin = self.bookings.get(room, (self.start, self.start))[1]
        end = begin + self.slot * slots
        self.bookings[room] = (begin, end)
        return {"success": True, "data": {"from": begin.isoformat(), "to": end.strftime("%a %d %b %H:%M")}}

    def days_until(self, day: str):
        \"\"\"Days from the start to a date.

        Args:
            day (str): An ISO date.
        \"\"\"
        try:
            target = date.fromisoformat(day)
        except ValueError as exc:
            return {"success": False, "error": str(exc)}
        delta = target - self.start.date()
        utc = self.start.replace(tzinfo=timezone.utc) + delta
        return {"success": True, "data": {"days": delta.days, "weekday": target.weekday(), "utc": utc.isoformat()}}
"""
)

_pattern("generators", "Numbering", [{"prefix": "INV"}, {"prefix": "PO"}])(
    """
import itertools


class Numbering:
    def __init__(self, init_config):
        self.prefix = init_config.get("prefix", "N")
        self.counter = itertools.count(1)
        self.stream = self._numbers()
        self.issued = []

    def _numbers(self):
        n = 100
        while True:
            n += 7
            yield f"{self.prefix}-{n}"

    def issue(self, count: int):
        \"\"\"Issue document numbers.

        Args:
            count (int): How many.
        \"\"\"
        count = max(0, min(count, 50))
        numbers = list(itertools.islice(self.stream, count))
        self.issued.extend(numbers)
        serial = next(self.counter)
        return {"success": True, "data": {"numbers": numbers, "serial": serial}}

    def evens(self):
        \"\"\"Issued numbers at even positions.\"\"\"
        picked = (n for i, n in enumerate(self.issued) if i % 2 == 0)
        return {"success": True, "data": list(picked)}
"""
)

_pattern("context_managers", "Warehouse", [{"stock": {"bolt": 10, "nut": 3}}, {"stock": {}}])(
    """
import contextlib


class Transaction:
    def __init__(self, store):
        self.store = store
        self.snapshot = None

    def __enter__(self):
        self.snapshot = dict(self.store.stock)
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            self.store.stock = self.snapshot
            self.store.rollbacks += 1
        return False


class Warehouse:
    def __init__(self, init_config):
        self.stock = dict(init_config.get("stock", {}))
        self.rollbacks = 0

    @contextlib.contextmanager
    def _audit(self, what):
        self.last = f"start {what}"
        try:
            yield
        finally:
            self.last = f"end {what}"

    def move(self, items: list[str], units: int):
        \"\"\"Take units of several items, all or nothing.

        Args:
            items (list[str]): Item names.
            units (int): Units of each.
        \"\"\"
        try:
            with self._audit("move"), Transaction(self):
                for item in items:
                    if self.stock.get(item, 0) < units:
                        raise ValueError(f"not enough {item}")
                    self.stock[item] -= units
        except ValueError as exc:
            return {"success": False, "error": str(exc)}
        return {"success": True, "data": dict(self.stock)}

    def drop(self, item: str):
        \"\"\"Forget an item.

        Args:
            item (str): Item name.
        \"\"\"
        with contextlib.suppress(KeyError):
            del self.stock[item]
        return {"success": True, "data": sorted(self.stock)}
"""
)

_pattern("slots_entities", "Fleet", [{"plates": ["v1", "v2"]}, {"plates": ["v7"]}])(
    """
class Van:
    __slots__ = ("plate", "km", "_secret")

    def __init__(self, plate, km=0):
        self.plate = plate
        self.km = km
        self._secret = "service code"


class Fleet:
    def __init__(self, init_config):
        self.vans = {p: Van(p) for p in init_config.get("plates", [])}

    def drive(self, plate: str, km: int):
        \"\"\"Log a drive.

        Args:
            plate (str): Van plate.
            km (int): Distance.
        \"\"\"
        van = self.vans.get(plate)
        if van is None:
            return {"success": False, "error": "unknown van"}
        van.km += km
        return {"success": True, "data": {"plate": van.plate, "km": van.km}}
"""
)

_pattern("class_registry", "Calculator", [{"memory": 0}, {"memory": 5}])(
    """
class Calculator:
    OPERATIONS = {}
    instances = 0

    def _register(symbol, registry=OPERATIONS):
        def add(fn):
            registry[symbol] = fn
            return fn

        return add

    @_register("add")
    def _add(a, b):
        return a + b

    @_register("mul")
    def _mul(a, b):
        return a * b

    def __init__(self, init_config):
        type(self).instances += 1
        self.memory = init_config.get("memory", 0)
        self.tape = []

    def apply(self, op: str, value: int):
        \"\"\"Apply an operation to the memory.

        Args:
            op (str): One of add or mul.
            value (int): Operand.
        \"\"\"
        fn = self.OPERATIONS.get(op)
        if fn is None:
            return {"success": False, "error": f"unknown op {op}; known: {sorted(self.OPERATIONS)}"}
        self.memory = fn(self.memory, value)
        self.tape.append(f"{op}{value}")
        return {"success": True, "data": {"memory": self.memory, "instances": Calculator.instances}}
"""
)

_pattern("ordereddict_lru", "PageCache", [{"capacity": 3}, {"capacity": 1}])(
    """
from collections import OrderedDict


class PageCache:
    def __init__(self, init_config):
        self.capacity = init_config.get("capacity", 2)
        self.pages = OrderedDict()
        self.evicted = []

    def load(self, url: str):
        \"\"\"Load a page through the cache.

        Args:
            url (str): Page address.
        \"\"\"
        if url in self.pages:
            self.pages.move_to_end(url)
            return {"success": True, "data": {"hit": True, "order": list(self.pages)}}
        self.pages[url] = f"<html>{url}</html>"
        if len(self.pages) > self.capacity:
            old, _ = self.pages.popitem(last=False)
            self.evicted.append(old)
        return {"success": True, "data": {"hit": False, "order": list(self.pages)}}
"""
)

_pattern("heapq_scheduler", "Scheduler", [{"tasks": [[3, "c"], [1, "a"]]}, {"tasks": []}])(
    """
import heapq


class Scheduler:
    def __init__(self, init_config):
        self.heap = [tuple(t) for t in init_config.get("tasks", [])]
        heapq.heapify(self.heap)
        self.log = []

    def schedule(self, task: str, priority: int):
        \"\"\"Schedule a task.

        Args:
            task (str): Task name.
            priority (int): Lower runs first.
        \"\"\"
        heapq.heappush(self.heap, (priority, task))
        return {"success": True, "data": {"next": self.heap[0][1], "smallest": heapq.nsmallest(2, self.heap)}}

    def run_next(self):
        \"\"\"Run the most urgent task.\"\"\"
        if not self.heap:
            return {"success": False, "error": "idle"}
        priority, task = heapq.heappop(self.heap)
        self.log.append(task)
        return {"success": True, "data": {"ran": task, "priority": priority}}
"""
)

_pattern("deep_recursion", "OrgChart", [{"depth": 120}, {"depth": 40}])(
    """
class OrgChart:
    def __init__(self, init_config):
        depth = init_config.get("depth", 10)
        self.root = {"name": "ceo", "reports": []}
        node = self.root
        for level in range(depth):
            child = {"name": f"l{level}", "reports": []}
            node["reports"].append(child)
            node = child

    def _depth(self, node):
        return 1 + max((self._depth(c) for c in node["reports"]), default=0)

    def _count(self, n):
        return 0 if n == 0 else 1 + self._count(n - 1)

    def measure(self):
        \"\"\"Depth of the chart and a deep recursive count.\"\"\"
        return {"success": True, "data": {"depth": self._depth(self.root), "count": self._count(800)}}

    def hire(self, name: str):
        \"\"\"Add a report at the deepest level.

        Args:
            name (str): New hire.
        \"\"\"
        node = self.root
        while node["reports"]:
            node = node["reports"][-1]
        node["reports"].append({"name": name, "reports": []})
        return {"success": True, "data": {"depth": self._depth(self.root)}}
"""
)

_pattern("megabyte_state", "Archive", [{"n_records": 9000}, {"n_records": 8000}])(
    """
class Archive:
    def __init__(self, init_config):
        n = init_config.get("n_records", 1000)
        self.records = {
            f"r{i:05d}": {"title": f"record number {i}", "body": "x" * 90, "views": i % 7} for i in range(n)
        }

    def view(self, record_id: str):
        \"\"\"View a record.

        Args:
            record_id (str): Record id.
        \"\"\"
        record = self.records.get(record_id)
        if record is None:
            return {"success": False, "error": "no such record"}
        record["views"] += 1
        return {"success": True, "data": {"title": record["title"], "views": record["views"]}}

    def size(self):
        \"\"\"How many records.\"\"\"
        return {"success": True, "data": len(self.records)}
"""
)

_pattern("string_sets", "Tagger", [{"allowed_tags": ["red", "blue", "green"]}, {"allowed_tags": ["x"]}])(
    """
class Tagger:
    def __init__(self, init_config):
        self.tags = set(init_config.get("allowed_tags", []))
        self.frozen = frozenset({"system", "admin"})
        self.by_item = {}

    def tag(self, item: str, tags: list[str]):
        \"\"\"Tag an item.

        Args:
            item (str): Item id.
            tags (list[str]): Tags to add.
        \"\"\"
        unknown = set(tags) - self.tags
        self.by_item.setdefault(item, set()).update(set(tags) & self.tags)
        return {"success": not unknown, "unknown": unknown, "tags": self.by_item[item]}

    def common(self):
        \"\"\"Tags every item has.\"\"\"
        sets = list(self.by_item.values())
        shared = set.intersection(*sets) if sets else set()
        return {"success": True, "data": shared | (self.frozen & {"admin"})}
"""
)

_pattern("defaultdict_counter", "Votes", [{"options": ["a", "b"]}, {"options": ["yes", "no", "maybe"]}])(
    """
from collections import Counter, defaultdict


class Votes:
    def __init__(self, init_config):
        self.options = list(init_config.get("options", []))
        self.tally = Counter()
        self.voters = defaultdict(list)

    def vote(self, voter: str, option: str):
        \"\"\"Cast a vote.

        Args:
            voter (str): Voter id.
            option (str): Chosen option.
        \"\"\"
        if option not in self.options:
            return {"success": False, "error": f"{option} is not an option"}
        self.tally[option] += 1
        self.voters[option].append(voter)
        return {"success": True, "data": {"leader": self.tally.most_common(1)[0][0], "tally": dict(self.tally)}}
"""
)

_pattern("namedtuple_records", "Atlas", [{"known_cities": {"oslo": [59.9, 10.7]}}, {"known_cities": {}}])(
    """
import math
from collections import namedtuple
from typing import NamedTuple

Point = namedtuple("Point", ["lat", "lon"])


class Leg(NamedTuple):
    origin: str
    target: str
    km: float


class Atlas:
    def __init__(self, init_config):
        self.cities = {k: Point(*v) for k, v in init_config.get("known_cities", {}).items()}
        self.legs = []

    def add_city(self, name: str, lat: float, lon: float):
        \"\"\"Add a city.

        Args:
            name (str): City.
            lat (float): Latitude.
            lon (float): Longitude.
        \"\"\"
        self.cities[name] = Point(lat, lon)
        return {"success": True, "data": self.cities[name]._asdict()}

    def leg(self, origin: str, target: str):
        \"\"\"Distance between two cities.

        Args:
            origin (str): From.
            target (str): To.
        \"\"\"
        if origin not in self.cities or target not in self.cities:
            return {"success": False, "error": "unknown city"}
        a, b = self.cities[origin], self.cities[target]
        km = round(math.dist(a, b) * 111.0, 3)
        self.legs.append(Leg(origin, target, km))
        return {"success": True, "data": self.legs[-1]}
"""
)

_pattern("abc_inheritance", "Zoo", [{"residents": {"rex": "dog"}}, {"residents": {}}])(
    """
from abc import ABC, abstractmethod


class Animal(ABC):
    def __init__(self, name):
        self.name = name
        self.fed = 0

    @abstractmethod
    def sound(self):
        ...

    def __repr__(self):
        return f"{type(self).__name__}({self.name!r})"


class Dog(Animal):
    def sound(self):
        return "woof"


class Cat(Animal):
    def sound(self):
        return "meow"


class Zoo:
    KINDS = {"dog": Dog, "cat": Cat}

    def __init__(self, init_config):
        self.animals = {n: self.KINDS[k](n) for n, k in init_config.get("residents", {}).items()}

    def adopt(self, name: str, kind: str):
        \"\"\"Adopt an animal.

        Args:
            name (str): Its name.
            kind (str): One of dog or cat.
        \"\"\"
        if kind not in self.KINDS:
            return {"success": False, "error": "unknown kind"}
        self.animals[name] = self.KINDS[kind](name)
        return {"success": True, "data": [self.animals[name], self.animals[name].sound()]}

    def feed(self, name: str):
        \"\"\"Feed an animal.

        Args:
            name (str): Its name.
        \"\"\"
        animal = self.animals[name]
        animal.fed += 1
        return {"success": True, "data": {"animal": animal, "fed": animal.fed}}
"""
)

_pattern("hash_ids_and_json", "Notes", [{"owner": "ann"}, {"owner": "bob"}])(
    """
import base64
import hashlib
import json
import uuid


class Notes:
    NAMESPACE = uuid.UUID("12345678-1234-5678-1234-567812345678")

    def __init__(self, init_config):
        self.owner = init_config.get("owner", "me")
        self.notes = {}
        self.snapshot = json.dumps({}, sort_keys=True)

    def write(self, text: str):
        \"\"\"Write a note.

        Args:
            text (str): Note text.
        \"\"\"
        digest = hashlib.sha256(f"{self.owner}:{text}".encode()).hexdigest()[:12]
        note_id = str(uuid.uuid5(self.NAMESPACE, digest))
        self.notes[note_id] = {"text": text, "b64": base64.b64encode(text.encode()).decode()}
        self.snapshot = json.dumps(self.notes, sort_keys=True)
        return {"success": True, "data": {"id": note_id, "digest": digest}}
"""
)

_pattern("plain_objects_in_state", "Kanban", [{"columns": ["todo", "done"]}, {"columns": ["todo"]}])(
    """
class Card:
    def __init__(self, title, column):
        self.title = title
        self.column = column
        self.history = [column]


class Kanban:
    def __init__(self, init_config):
        self.columns = list(init_config.get("columns", ["todo"]))
        self.cards = {}
        self.hooks = [len, sorted]
        self.on_move = self._log_move

    def _log_move(self, card):
        return card.title

    def add_card(self, title: str):
        \"\"\"Add a card to the first column.

        Args:
            title (str): Card title.
        \"\"\"
        self.cards[title] = Card(title, self.columns[0])
        return {"success": True, "data": {"cards": len(self.cards)}}

    def move_card(self, title: str, column: str):
        \"\"\"Move a card.

        Args:
            title (str): Card title.
            column (str): Target column.
        \"\"\"
        card = self.cards.get(title)
        if card is None or column not in self.columns:
            return {"success": False, "error": "unknown card or column"}
        card.column = column
        card.history.append(column)
        return {"success": True, "data": {"moved": self.on_move(card), "history": card.history}}
"""
)


# -- the patterns that store a sandbox directory name (deterministic only with deterministic dirs) -------------------

_pattern("os_getcwd", "Workspace", [{"name": "alpha"}, {"name": "beta"}], DIR_PATTERNS)(
    """
import os


class Workspace:
    def __init__(self, init_config):
        self.name = init_config.get("name", "ws")
        self.root = os.getcwd()
        self.files = []

    def touch(self, filename: str):
        \"\"\"Create a file in the workspace.

        Args:
            filename (str): File name.
        \"\"\"
        path = os.path.join(self.root, os.path.basename(filename) or "unnamed")
        with open(path, "w") as handle:
            handle.write(self.name)
        self.files.append(path)
        return {"success": True, "data": {"path": path, "cwd": os.getcwd()}}
"""
)

_pattern("tempfile_gettempdir", "Exporter", [{"fmt": "csv"}, {"fmt": "tsv"}], DIR_PATTERNS)(
    """
import os
import tempfile


class Exporter:
    def __init__(self, init_config):
        self.fmt = init_config.get("fmt", "csv")
        self.tmp = tempfile.gettempdir()
        self.exports = []

    def export(self, rows: int):
        \"\"\"Export rows to a file in the temp folder.

        Args:
            rows (int): Number of rows.
        \"\"\"
        path = os.path.join(self.tmp, f"export{len(self.exports)}.{self.fmt}")
        with open(path, "w") as handle:
            handle.write("\\n".join(str(i) for i in range(max(0, min(rows, 100)))))
        self.exports.append(path)
        return {"success": True, "data": {"path": path, "bytes": os.path.getsize(path)}}
"""
)

_pattern("tempfile_mkstemp", "Uploads", [{"limit": 3}, {"limit": 1}], DIR_PATTERNS)(
    """
import os
import tempfile


class Uploads:
    def __init__(self, init_config):
        self.limit = init_config.get("limit", 2)
        self.staged = []

    def stage(self, content: str):
        \"\"\"Stage an upload in a temporary file.

        Args:
            content (str): File content.
        \"\"\"
        if len(self.staged) >= self.limit:
            return {"success": False, "error": "too many staged"}
        fd, path = tempfile.mkstemp(suffix=".upload")
        with os.fdopen(fd, "w") as handle:
            handle.write(content)
        self.staged.append(path)
        return {"success": True, "data": {"path": path}}
"""
)


# -- what the language runtime needs: threads, an event loop, file modes and copies, /etc, memory (issue 53) --------
#: patterns that plain Python runs but the sandbox refuses by design (a new process): each of their calls that
#: reaches the refusal is a ``sandbox_refused`` step naming the syscall, never compared with plain Python
REFUSED_PATTERNS: dict[str, Pattern] = {}

_pattern("worker_threads", "Squares", [{"base": 2}, {"base": 5}])(
    """
import threading


class Squares:
    def __init__(self, init_config):
        self.base = init_config.get("base", 1)
        self.results = []

    def compute(self, count: int):
        \"\"\"Square numbers in worker threads.

        Args:
            count (int): How many numbers.
        \"\"\"
        count = max(0, min(count, 8))
        out = [None] * count

        def work(i):
            out[i] = (self.base + i) ** 2

        threads = [threading.Thread(target=work, args=(i,), name=f"sq-{i}") for i in range(count)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.results.extend(out)
        return {"success": True, "data": {"squares": out, "alive": sum(t.is_alive() for t in threads)}}
"""
)

_pattern("thread_pool_executor", "PriceFetcher", [{"prices": {"a": 3, "b": 4}}, {"prices": {}}])(
    """
from concurrent.futures import ThreadPoolExecutor


class PriceFetcher:
    def __init__(self, init_config):
        self.prices = dict(init_config.get("prices", {}))
        self.fetched = {}

    def fetch_all(self, multiplier: int):
        \"\"\"Fetch every price, concurrently.

        Args:
            multiplier (int): Factor applied to each price.
        \"\"\"
        with ThreadPoolExecutor(max_workers=4) as pool:
            names = sorted(self.prices)
            values = list(pool.map(lambda n: self.prices[n] * multiplier, names))
        self.fetched = dict(zip(names, values))
        return {"success": True, "data": self.fetched}

    def submit_one(self, name: str):
        \"\"\"Fetch one price through a future.

        Args:
            name (str): Product name.
        \"\"\"
        with ThreadPoolExecutor(max_workers=1) as pool:
            future = pool.submit(self.prices.get, name, 0)
        return {"success": True, "data": {"name": name, "price": future.result(), "done": future.done()}}
"""
)

_pattern("threading_timer", "Reminders", [{"names": ["tea"]}, {"names": []}])(
    """
import threading


class Reminders:
    def __init__(self, init_config):
        self.fired = list(init_config.get("names", []))
        self.cancelled = 0

    def remind(self, name: str):
        \"\"\"Fire a reminder after a short delay.

        Args:
            name (str): What to remind.
        \"\"\"
        timer = threading.Timer(0.001, self.fired.append, args=(name,))
        timer.start()
        timer.join()
        return {"success": True, "data": {"fired": len(self.fired)}}

    def remind_and_cancel(self, name: str):
        \"\"\"Schedule a reminder and cancel it.

        Args:
            name (str): What not to remind.
        \"\"\"
        timer = threading.Timer(60, self.fired.append, args=(name,))
        timer.start()
        timer.cancel()
        timer.join()
        self.cancelled += 1
        return {"success": True, "data": {"cancelled": self.cancelled}}
"""
)

_pattern("queue_consumer_thread", "Mailroom", [{"letters": ["x", "y"]}, {"letters": []}])(
    """
import queue
import threading


class Mailroom:
    def __init__(self, init_config):
        self.letters = list(init_config.get("letters", []))
        self.delivered = []

    def deliver(self, count: int):
        \"\"\"Deliver letters through a consumer thread.

        Args:
            count (int): Letters to deliver.
        \"\"\"
        inbox = queue.Queue()
        done = threading.Event()

        def consume():
            while (item := inbox.get()) is not None:
                self.delivered.append(item.upper())
            done.set()

        worker = threading.Thread(target=consume, daemon=True)
        worker.start()
        for letter in self.letters[: max(0, min(count, 10))]:
            inbox.put(letter)
        inbox.put(None)
        worker.join()
        return {"success": True, "data": {"delivered": list(self.delivered), "done": done.is_set()}}
"""
)

_pattern("asyncio_run", "Crawler", [{"pages": ["a", "bb"]}, {"pages": []}])(
    """
import asyncio


class Crawler:
    def __init__(self, init_config):
        self.pages = list(init_config.get("pages", []))
        self.sizes = {}

    async def _size(self, page):
        await asyncio.sleep(0)
        return page, len(page) * 10

    async def _crawl(self):
        results = await asyncio.gather(*(self._size(p) for p in self.pages))
        queue = asyncio.Queue()
        for name, size in results:
            await queue.put((name, size))
        out = {}
        while not queue.empty():
            name, size = await queue.get()
            out[name] = size
        return out

    def crawl(self):
        \"\"\"Crawl every page concurrently.\"\"\"
        self.sizes = asyncio.run(self._crawl())
        return {"success": True, "data": self.sizes}

    def add_page(self, page: str):
        \"\"\"Add a page.

        Args:
            page (str): Page name.
        \"\"\"
        self.pages.append(page[:40])
        return {"success": True, "data": {"pages": len(self.pages)}}
"""
)

_pattern("shutil_copies", "Backup", [{"files": {"a.txt": "alpha"}}, {"files": {}}])(
    """
import os
import shutil
import tempfile


class Backup:
    def __init__(self, init_config):
        self.files = dict(init_config.get("files", {}))
        self.copied = []

    def backup(self, suffix: str):
        \"\"\"Copy every file with shutil.copy, copy2 and copytree.

        Args:
            suffix (str): Suffix of the copies.
        \"\"\"
        suffix = "".join(c for c in suffix if c.isalnum())[:8] or "bak"
        with tempfile.TemporaryDirectory() as root:
            src = os.path.join(root, "src")
            os.mkdir(src)
            for name, content in self.files.items():
                with open(os.path.join(src, name), "w") as handle:
                    handle.write(content)
            tree = shutil.copytree(src, os.path.join(root, "tree"))
            out = {}
            for name in sorted(self.files):
                one = shutil.copy(os.path.join(src, name), os.path.join(root, name + "." + suffix))
                two = shutil.copy2(os.path.join(src, name), os.path.join(root, name + ".2." + suffix))
                with open(one) as a, open(two) as b, open(os.path.join(tree, name)) as c:
                    out[name] = [a.read(), b.read(), c.read()]
        self.copied.append(suffix)
        return {"success": True, "data": out}

    def add_file(self, name: str, content: str):
        \"\"\"Add a file to back up.

        Args:
            name (str): File name.
            content (str): Its content.
        \"\"\"
        name = "".join(c for c in name if c.isalnum())[:20]
        if not name:
            return {"success": False, "error": "bad name"}
        self.files[name + ".txt"] = content[:100]
        return {"success": True, "data": {"files": len(self.files)}}
"""
)

_pattern("os_chmod", "Vault", [{"secret": "s3"}, {"secret": ""}])(
    """
import os
import stat
import tempfile


class Vault:
    def __init__(self, init_config):
        self.secret = init_config.get("secret", "")
        self.modes = []

    def lock(self, readonly: bool):
        \"\"\"Write the secret to a file and restrict its mode.

        Args:
            readonly (bool): Owner read-only instead of read-write.
        \"\"\"
        with tempfile.TemporaryDirectory() as root:
            path = os.path.join(root, "secret")
            with open(path, "w") as handle:
                handle.write(self.secret)
            os.chmod(path, 0o400 if readonly else 0o600)
            os.utime(path, (1_700_000_000, 1_700_000_000))
            mode = oct(stat.S_IMODE(os.stat(path).st_mode))
            os.chmod(path, 0o600)
        self.modes.append(mode)
        return {"success": True, "data": {"mode": mode, "writable": not readonly}}
"""
)

_pattern("shelve_store", "Preferences", [{"theme": "dark"}, {"theme": "light"}])(
    """
import dbm.dumb
import os
import shelve
import tempfile


class Preferences:
    def __init__(self, init_config):
        self.theme = init_config.get("theme", "light")
        self.saved = {}

    def save(self, key: str, value: str):
        \"\"\"Save a preference to a shelf and read it back.

        Args:
            key (str): Preference name.
            value (str): Its value.
        \"\"\"
        with tempfile.TemporaryDirectory() as root:
            with shelve.open(os.path.join(root, "prefs")) as shelf:
                shelf["theme"] = self.theme
                shelf[key] = value
            with shelve.open(os.path.join(root, "prefs"), flag="r") as shelf:
                self.saved = {k: shelf[k] for k in sorted(shelf.keys())}
            with dbm.dumb.open(os.path.join(root, "raw"), "c") as db:
                db[key.encode()] = value.encode()
                raw = db[key.encode()].decode()
        return {"success": True, "data": {"saved": self.saved, "raw": raw}}
"""
)

_pattern("sqlite_wal", "Inventory", [{"items": {"bolt": 3}}, {"items": {}}])(
    """
import os
import sqlite3
import tempfile


class Inventory:
    def __init__(self, init_config):
        self.items = dict(init_config.get("items", {}))
        self.mode = None

    def stock_take(self, extra: int):
        \"\"\"Write the stock to an SQLite database in WAL mode and total it.

        Args:
            extra (int): Units added to every item.
        \"\"\"
        with tempfile.TemporaryDirectory() as root:
            con = sqlite3.connect(os.path.join(root, "stock.db"))
            self.mode = con.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            con.execute("CREATE TABLE stock (name TEXT PRIMARY KEY, qty INTEGER)")
            con.executemany("INSERT INTO stock VALUES (?, ?)", [(k, v + extra) for k, v in self.items.items()])
            con.commit()
            reader = sqlite3.connect(os.path.join(root, "stock.db"))
            total = reader.execute("SELECT coalesce(sum(qty), 0), count(*) FROM stock").fetchone()
            reader.close()
            con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            con.close()
        return {"success": True, "data": {"mode": self.mode, "total": total[0], "rows": total[1]}}
"""
)

_pattern("disk_usage", "Quota", [{"limit_mb": 10}, {"limit_mb": 0}])(
    """
import shutil
import tempfile


class Quota:
    def __init__(self, init_config):
        self.limit_mb = init_config.get("limit_mb", 1)
        self.checks = 0

    def check_space(self, needed_mb: int):
        \"\"\"Check that the temp folder has room.

        Args:
            needed_mb (int): Space needed, MiB.
        \"\"\"
        usage = shutil.disk_usage(tempfile.gettempdir())
        self.checks += 1
        fits = 0 <= needed_mb <= self.limit_mb and usage.free >= needed_mb * 1024
        return {"success": True, "data": {"fits": fits, "sane": usage.total >= usage.free >= 0 and usage.total > 0}}
"""
)

_pattern("getpass_getuser", "Audit", [{"app": "shop"}, {"app": "desk"}])(
    """
import getpass


class Audit:
    def __init__(self, init_config):
        self.app = init_config.get("app", "app")
        self.entries = []

    def record(self, action: str):
        \"\"\"Record an action with the current user.

        Args:
            action (str): What happened.
        \"\"\"
        user = getpass.getuser()
        self.entries.append({"action": action[:40], "by_someone": bool(user)})
        return {"success": True, "data": {"entries": len(self.entries), "user_is_text": isinstance(user, str)}}
"""
)

_pattern("gethostbyname_localhost", "ServiceMap", [{"services": {"db": "localhost"}}, {"services": {}}])(
    """
import socket


class ServiceMap:
    def __init__(self, init_config):
        self.services = dict(init_config.get("services", {}))
        self.resolved = {}

    def resolve(self, name: str):
        \"\"\"Resolve a service's host (only localhost is configured).

        Args:
            name (str): Service name.
        \"\"\"
        host = self.services.get(name, "localhost")
        if host != "localhost":
            return {"success": False, "error": "unknown host"}
        self.resolved[name] = socket.gethostbyname(host)
        return {"success": True, "data": {"name": name, "address": self.resolved[name]}}

    def add_service(self, name: str):
        \"\"\"Register a service on localhost.

        Args:
            name (str): Service name.
        \"\"\"
        self.services[name[:20]] = "localhost"
        return {"success": True, "data": {"services": sorted(self.services)}}
"""
)

_pattern("mimetypes_guess", "MediaLibrary", [{"files": ["notes.md"]}, {"files": []}])(
    """
import mimetypes


class MediaLibrary:
    def __init__(self, init_config):
        self.files = list(init_config.get("files", []))
        self.types = {}

    def classify(self):
        \"\"\"Guess the media type of every file.\"\"\"
        self.types = {name: mimetypes.guess_type(name)[0] for name in self.files}
        return {"success": True, "data": self.types}

    def add(self, stem: str, extension: str):
        \"\"\"Add a file.

        Args:
            stem (str): File name without extension.
            extension (str): One of md, webp, json, csv, png, html, pdf, txt.
        \"\"\"
        if extension not in ("md", "webp", "json", "csv", "png", "html", "pdf", "txt"):
            return {"success": False, "error": "unsupported extension"}
        name = f"{stem[:20] or 'file'}.{extension}"
        self.files.append(name)
        return {"success": True, "data": {"name": name, "type": mimetypes.guess_type(name)[0]}}
"""
)

_pattern("sysconf_memory", "CacheSizer", [{"share": 8}, {"share": 2}])(
    """
import os


class CacheSizer:
    def __init__(self, init_config):
        self.share = max(1, init_config.get("share", 4))
        pages = os.sysconf("SC_PHYS_PAGES")
        self.total_known = pages > 0
        self.budget = min(pages * os.sysconf("SC_PAGE_SIZE") // self.share, 64 << 20)

    def size_for(self, entries: int):
        \"\"\"How many entries of 1 KiB the cache may hold.

        Args:
            entries (int): Entries wanted.
        \"\"\"
        allowed = min(max(entries, 0), self.budget // 1024)
        return {"success": True, "data": {"allowed": allowed, "budget": self.budget}}
"""
)

_pattern("numpy_arrays", "Scores", [{"scores": [3, 1, 2]}, {"scores": []}])(
    """
try:
    import numpy as np
except ImportError:  # the oracle and the sandbox share one interpreter: both take the same branch
    np = None


class Scores:
    def __init__(self, init_config):
        self.scores = [int(s) for s in init_config.get("scores", [])]

    def add(self, score: int):
        \"\"\"Add a score.

        Args:
            score (int): The score.
        \"\"\"
        self.scores.append(max(-1000, min(score, 1000)))
        return {"success": True, "data": {"count": len(self.scores)}}

    def summary(self):
        \"\"\"Sum, cumulative sum and order of the scores.\"\"\"
        if np is None:
            return {"success": True, "data": {"total": sum(self.scores), "numpy": False}}
        arr = np.array(self.scores, dtype=np.int64)
        return {
            "success": True,
            "data": {
                "total": int(arr.sum()),
                "cumulative": arr.cumsum().tolist(),
                "order": np.argsort(arr, kind="stable").tolist(),
                "doubled": (arr * 2).tolist(),
            },
        }
"""
)

_pattern("zoneinfo_convert", "Meetings", [{"city": "Europe/Paris"}, {"city": "Asia/Tokyo"}])(
    """
from datetime import datetime
from zoneinfo import ZoneInfo

class Meetings:
    def __init__(self, init_config):
        self.city = init_config.get("city", "UTC")
        self.booked = []

    def book(self, hour: int):
        \"\"\"Book a meeting at an hour (local time of the city) on 2025-03-30.

        Args:
            hour (int): 0 to 23.
        \"\"\"
        local = datetime(2025, 3, 30, max(0, min(hour, 23)), 30, tzinfo=ZoneInfo(self.city))
        utc = local.astimezone(ZoneInfo("UTC"))
        ny = local.astimezone(ZoneInfo("America/New_York"))
        self.booked.append(utc.isoformat())
        offset = str(local.utcoffset())
        return {"success": True, "data": {"utc": utc.isoformat(), "new_york": ny.isoformat(), "offset": offset}}

    def list_meetings(self):
        \"\"\"Every meeting.\"\"\"
        return {"success": True, "data": sorted(self.booked)}
"""
)

_pattern("pandas_frame", "SalesBook", [{"region": "north"}, {"region": "south"}])(
    """
import pandas as pd

class SalesBook:
    def __init__(self, init_config):
        self.region = init_config.get("region", "north")
        self.rows = [{"item": "pen", "qty": 3, "price": 1.5}, {"item": "ink", "qty": 1, "price": 7.25}]

    def add_sale(self, item: str, qty: int, price: float):
        \"\"\"Record a sale.

        Args:
            item (str): The item.
            qty (int): How many.
            price (float): Unit price.
        \"\"\"
        if qty <= 0:
            return {"success": False, "error": "qty must be positive"}
        self.rows.append({"item": item[:20], "qty": int(qty), "price": float(price)})
        return {"success": True}

    def totals(self):
        \"\"\"Revenue per item.\"\"\"
        df = pd.DataFrame(self.rows)
        df["revenue"] = df["qty"] * df["price"]
        out = df.groupby("item", sort=True)["revenue"].sum().round(2)
        return {"success": True, "data": {k: float(v) for k, v in out.items()}}
"""
)

_pattern("sqlite_json1", "Catalog2", [{"shop": "a"}, {"shop": "b"}])(
    """
import sqlite3, json

class Catalog2:
    def __init__(self, init_config):
        self.shop = init_config.get("shop", "a")
        self.db = sqlite3.connect(":memory:", check_same_thread=False)
        self.db.row_factory = sqlite3.Row
        self.db.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, doc TEXT)")
        self.db.execute("INSERT INTO items (doc) VALUES (?)", (json.dumps({"name": "pen", "tags": ["office"]}),))
        self.db.commit()

    def add_item(self, name: str, tag: str):
        \"\"\"Add an item.

        Args:
            name (str): Its name.
            tag (str): One tag.
        \"\"\"
        self.db.execute("INSERT INTO items (doc) VALUES (?)", (json.dumps({"name": name[:30], "tags": [tag[:10]]}),))
        self.db.commit()
        return {"success": True}

    def names(self):
        \"\"\"Every item's name, through SQLite's JSON functions.\"\"\"
        rows = self.db.execute("SELECT id, json_extract(doc, '$.name') AS name FROM items ORDER BY id").fetchall()
        return {"success": True, "data": [dict(r) for r in rows]}
"""
)

_pattern("subprocess_run", "Shell", [{"greeting": "hi"}, {"greeting": "yo"}], REFUSED_PATTERNS)(
    """
import subprocess


class Shell:
    def __init__(self, init_config):
        self.greeting = init_config.get("greeting", "hi")
        self.outputs = []

    def echo(self, text: str):
        \"\"\"Echo a text through a child process.

        Args:
            text (str): What to echo.
        \"\"\"
        done = subprocess.run(["echo", self.greeting, text[:40]], capture_output=True, text=True, check=True)
        self.outputs.append(done.stdout.strip())
        return {"success": True, "data": {"output": self.outputs[-1]}}
"""
)


def corpus(patterns: dict[str, Pattern]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(env items, scenarios) in EnvScaler's released format; tools are derived from the code, as for a corpus
    that ships none."""
    items = {
        f"benign_{name}": {
            "env_class_name": cls,
            "env_class_code": code,
            "environment_introduction": f"An environment written with the {name.replace('_', ' ')} pattern.",
            "constraints_rules": "",
        }
        for name, (cls, code, _) in patterns.items()
    }
    scenarios = [
        {
            "task_id": f"benign_{name}-{i}",
            "env_id": f"benign_{name}",
            "env_class_name": cls,
            "init_config": config,
            "task": f"Use the {cls}.",
        }
        for name, (cls, _, configs) in patterns.items()
        for i, config in enumerate(configs)
    ]
    return items, scenarios


def write_corpus(directory: Path, patterns: dict[str, Pattern]) -> tuple[Path, Path]:
    """The corpus as ``191_env_metadata.json`` + ``scenarios.json`` under ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    items, scenarios = corpus(patterns)
    env_file, scen_file = directory / "191_env_metadata.json", directory / "scenarios.json"
    env_file.write_text(json.dumps(items, indent=1))
    scen_file.write_text(json.dumps(scenarios, indent=1))
    return env_file, scen_file


# -- the oracle: plain Python, no sandbox ----------------------------------------------------------------------------


def _build(class_name: str, code: str, init_config: dict[str, Any], module_name: str) -> Any:
    module = types.ModuleType(module_name)
    sys.modules[module_name] = module  # dataclasses look their class's module up while the body runs
    try:
        exec(compile(code, f"<{module_name}>", "exec"), module.__dict__)  # our own test corpus
    finally:
        del sys.modules[module_name]
    cls = module.__dict__[class_name]
    try:
        instance = cls(copy.deepcopy(init_config))
    except TypeError:
        instance = cls()
    for key, value in copy.deepcopy(init_config).items():
        setattr(instance, key, value)
    return instance


def _state_hash(instance: Any) -> str:
    from pipeline.core.canonical import canonicalize, state_hash

    return state_hash(canonicalize({k: v for k, v in vars(instance).items() if not (k[:2] == k[-2:] == "__")}))


def plain_labels(trajectories: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per trajectory (``class_name``, ``code``, ``init_config``, ``calls``: ``[tool, arguments]``) its initial state
    hash and per call the observation text, the canonical JSON of the return value (None when it raised) and the
    state hash after, computed by running the class here. The definitions of the canonical form and its hash are the
    pipeline's (they are what a label *is*); nothing else of the pipeline runs."""
    from pipeline.core.canonical import canonical_json, canonicalize

    out = []
    for n, traj in enumerate(trajectories):
        instance = _build(traj["class_name"], traj["code"], traj["init_config"], f"benign_env_{n}")
        labels: dict[str, Any] = {"initial_state_hash": _state_hash(instance), "steps": []}
        for tool, arguments in traj["calls"]:
            try:
                value = getattr(instance, tool)(**copy.deepcopy(arguments))
            except Exception as exc:
                observation, value_json = f"Error: {type(exc).__name__}: {exc}", None
            else:
                observation, value_json = str(value), canonical_json(canonicalize(value))
            labels["steps"].append(
                {"observation": observation, "value_json": value_json, "state_after_hash": _state_hash(instance)}
            )
        out.append(labels)
    return out


if __name__ == "__main__":
    json.dump(plain_labels(json.load(sys.stdin)), sys.stdout)
