"""A telecom help desk in EnvScaler's released format, written the way schema-rich corpora are: a pydantic database,
``(str, Enum)`` fields, tool schemas that pydantic writes (``$defs``/``$ref``, enums, nested objects, ``format``,
``pattern``, bounds), refusals that list the valid values.

- ``get_details_by_id(id)`` takes an id of the customer, line or plan tables — never the attribute names of the
  ``user`` object (``device``, ``surroundings``), which is a state object, not a table of ids;
- ``suspend_line(customer_id, line_id, reason)`` and ``book_visit(customer_id, line_id, day, email, slots)`` are
  valid only for a line *of that customer* (one record), ``reason`` an enum behind a ``$ref``;
- ``set_apn_settings(line_id, settings)`` takes a nested object (``$ref`` to ``ApnSettings``: an enum field, a
  pattern, a bounded integer, an optional nested object) and validates it with pydantic;
- ``grant_app_permission(app_name, permission)`` and ``set_network_mode_preference(mode)`` take plain strings whose
  valid values only the refusal names ("must be one of …", "Valid modes are: …").

Refusals are ``{"success": False, "error": ...}``. Every write of one valid call changes at least one field.
"""

from __future__ import annotations

import random
from typing import Any

from tests.support.user_corpora import env_item

CLASS = "TelecomDesk"
#: tools that change state
WRITE_TOOLS = ("suspend_line", "book_visit", "set_apn_settings", "grant_app_permission", "set_network_mode_preference")
#: tools whose valid values only their refusals list
LISTING_TOOLS = ("grant_app_permission", "set_network_mode_preference")
NETWORK_MODES = ("2g_only", "3g_only", "4g_5g_preferred")

CODE = '''
from enum import Enum
from typing import Optional

from pydantic import BaseModel, Field


class LineStatus(str, Enum):
    ACTIVE = "Active"
    SUSPENDED = "Suspended"


class SuspendReason(str, Enum):
    LOST = "lost_device"
    TRAVEL = "travel"
    BILLING = "billing"


class ApnProtocol(str, Enum):
    IPV4 = "IPv4"
    IPV6 = "IPv6"
    DUAL = "IPv4v6"


class Proxy(BaseModel):
    host: str = Field(pattern=r"^[a-z]+\\.[a-z]{2,4}$")
    port: int = Field(ge=1, le=65535)


class ApnSettings(BaseModel):
    name: str = Field(min_length=2, max_length=20)
    apn: str = Field(pattern=r"^[a-z]+(\\.[a-z]+)*$")
    protocol: ApnProtocol
    mtu: int = Field(ge=576, le=1500)
    proxy: Optional[Proxy] = None


class Plan(BaseModel):
    plan_id: str
    name: str
    price: float


class Line(BaseModel):
    line_id: str
    customer_id: str
    phone_number: str
    status: LineStatus
    plan_id: str
    apn: Optional[ApnSettings] = None
    visits: list[str] = []


class Customer(BaseModel):
    customer_id: str
    name: str
    email: str
    line_ids: list[str]


class Database(BaseModel):
    customers: dict[str, Customer]
    lines: dict[str, Line]
    plans: dict[str, Plan]


class App(BaseModel):
    name: str
    permissions: dict[str, bool]


class Device(BaseModel):
    model: str
    network_mode: str
    apps: dict[str, App]


class Surroundings(BaseModel):
    city: str
    signal: int


class UserDB(BaseModel):
    device: Device
    surroundings: Surroundings


class TelecomDesk:
    """A telecom help desk: customers, their lines and plans; the customer's phone and where it is."""

    def __init__(self, init_config=None):
        self.db = Database.model_validate((init_config or {}).get("data", {}))
        self.user = UserDB.model_validate((init_config or {}).get("phone", {}))

    @property
    def data(self):
        return self.db.model_dump()

    @data.setter
    def data(self, value):
        self.db = Database.model_validate(value)

    @property
    def phone(self):
        return self.user.model_dump()

    @phone.setter
    def phone(self, value):
        self.user = UserDB.model_validate(value)

    def get_details_by_id(self, id: str) -> dict:
        """Details of a customer, line or plan by its id."""
        for table in (self.db.customers, self.db.lines, self.db.plans):
            if id in table:
                return {"success": True, "data": table[id].model_dump(mode="json")}
        return {"success": False, "error": f"no customer, line or plan with id {id}"}

    def _line_of(self, customer_id, line_id):
        customer = self.db.customers.get(customer_id)
        if customer is None:
            return None, f"customer {customer_id} not found"
        if line_id not in customer.line_ids:
            return None, f"line {line_id} does not belong to customer {customer_id}"
        return self.db.lines[line_id], None

    def suspend_line(self, customer_id: str, line_id: str, reason: SuspendReason) -> dict:
        """Suspend an active line of a customer."""
        line, error = self._line_of(customer_id, line_id)
        if error:
            return {"success": False, "error": error}
        if line.status != LineStatus.ACTIVE:
            return {"success": False, "error": f"line {line_id} is not active"}
        line.status = LineStatus.SUSPENDED
        line.visits = [*line.visits, f"suspended:{SuspendReason(reason).value}"]
        return {"success": True, "data": {"line_id": line_id, "status": "Suspended"}}

    def book_visit(
        self, customer_id: str, line_id: str, day: datetime.date, email: EmailLike, slots: list[Slot]
    ) -> dict:
        """Book a technician visit for a line of a customer on a day, in hourly slots."""
        line, error = self._line_of(customer_id, line_id)
        if error:
            return {"success": False, "error": error}
        if not slots or any(not 8 <= s <= 18 for s in slots):
            return {"success": False, "error": "slots must be hours from 8 to 18"}
        if "@" not in email:
            return {"success": False, "error": f"not an email address: {email}"}
        self.db.customers[customer_id].email = email
        line.visits = [*line.visits, *[f"{day}T{s:02d}" for s in slots]]
        return {"success": True, "data": {"line_id": line_id, "visits": line.visits}}

    def set_apn_settings(self, line_id: str, settings: ApnSettings) -> dict:
        """Set the APN settings of a line."""
        if line_id not in self.db.lines:
            return {"success": False, "error": f"line {line_id} not found"}
        try:
            apn = ApnSettings.model_validate(settings)
        except Exception as exc:
            return {"success": False, "error": f"invalid APN settings: {str(exc).splitlines()[0]}"}
        self.db.lines[line_id].apn = apn
        return {"success": True, "data": apn.model_dump(mode="json")}

    def grant_app_permission(self, app_name: str, permission: str) -> dict:
        """Grant an app on the phone a permission."""
        app = self.user.device.apps.get(app_name)
        if app is None:
            return {"success": False, "error": f"app {app_name} is not installed"}
        if permission not in app.permissions:
            valid = ", ".join(app.permissions)
            return {"success": False, "error": f"permission {permission} is unknown: must be one of {valid}."}
        if app.permissions[permission]:
            return {"success": False, "error": f"{app_name} already holds {permission}"}
        app.permissions[permission] = True
        return {"success": True, "data": {"app": app_name, "permission": permission}}

    def set_network_mode_preference(self, mode: str) -> dict:
        """Set the phone's preferred network mode."""
        modes = ["2g_only", "3g_only", "4g_5g_preferred"]
        if mode not in modes:
            return {"success": False, "error": f"Invalid mode {mode}. Valid modes are: {', '.join(modes)}."}
        if self.user.device.network_mode == mode:
            return {"success": False, "error": f"the network mode is already {mode}"}
        self.user.device.network_mode = mode
        return {"success": True, "data": {"network_mode": mode}}
'''

# the annotations pydantic writes the tool schemas from, kept out of the class code the sandbox runs (``book_visit``'s
# ``datetime.date``/``EmailLike``/``Slot`` are plain in the code: a date string, a string, an integer)
_SCHEMA_TYPES = """
import datetime
from typing import Annotated
from pydantic import Field
EmailLike = Annotated[str, Field(json_schema_extra={"format": "email"})]
Slot = Annotated[int, Field(ge=8, le=18)]
"""


def _namespace() -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    exec(_SCHEMA_TYPES + CODE, namespace)  # our own fixture code, in the test process
    return namespace


def tools() -> list[dict[str, Any]]:
    """The tool schemas as pydantic writes them for each method's signature (``$defs``/``$ref`` and all)."""
    import inspect
    import typing

    from pydantic import create_model

    namespace = _namespace()
    cls = namespace[CLASS]
    out = []
    for name, fn in vars(cls).items():
        if name.startswith("_") or not callable(fn):
            continue
        hints = typing.get_type_hints(fn, namespace, include_extras=True)
        fields = {p: (hints[p], ...) for p in list(inspect.signature(fn).parameters)[1:]}
        model = create_model(f"{name}_args", **fields)
        model.model_rebuild(_types_namespace=namespace)
        params = model.model_json_schema()
        params.pop("title", None)
        for schema in params["properties"].values():
            schema.pop("title", None)
        out.append(
            {
                "type": "function",
                "function": {"name": name, "description": (fn.__doc__ or "").strip(), "parameters": params},
            }
        )
    return out


def runnable_code() -> str:
    """The class code as the sandbox runs it: its annotations that only the schemas need made plain."""
    return "import datetime\nEmailLike = str\nSlot = int\n" + CODE


def state(k: int) -> dict[str, Any]:
    """Scenario ``k``'s initial config: a database of customers with their lines, and the customer's phone."""
    rng = random.Random(k)
    plans = {f"P{i}": {"plan_id": f"P{i}", "name": f"plan {i}", "price": 10.0 * (i + 1)} for i in range(3)}
    customers, lines = {}, {}
    for c in range(4):
        cid = f"C{k}{c}"
        ids = [f"L{k}{c}{n}" for n in range(rng.randint(1, 3))]
        customers[cid] = {"customer_id": cid, "name": f"customer {c}", "email": f"c{c}@mail.net", "line_ids": ids}
        for lid in ids:
            lines[lid] = {
                "line_id": lid,
                "customer_id": cid,
                "phone_number": f"555-{rng.randint(1000, 9999)}",
                "status": "Active" if rng.random() < 0.7 else "Suspended",
                "plan_id": rng.choice(sorted(plans)),
            }
    apps = {
        name: {"name": name, "permissions": {p: rng.random() < 0.3 for p in perms}}
        for name, perms in (("maps", ("location", "camera")), ("chat", ("microphone", "contacts", "camera")))
    }
    phone = {
        "device": {"model": "X1", "network_mode": rng.choice(NETWORK_MODES), "apps": apps},
        "surroundings": {"city": "Springfield", "signal": rng.randint(1, 5)},
    }
    return {"data": {"customers": customers, "lines": lines, "plans": plans}, "phone": phone}


def corpus(scenarios: int = 6) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The desk as one environment with ``scenarios`` scenarios (``write_released`` writes them)."""
    items = {"telecom": env_item(CLASS, runnable_code(), tools())}
    rows = [
        {
            "task_id": f"telecom-{k}",
            "env_id": "telecom",
            "env_class_name": CLASS,
            "init_config": state(k),
            "task": "Help the customer with their line and phone.",
        }
        for k in range(scenarios)
    ]
    return items, rows
