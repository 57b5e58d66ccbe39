"""A phone-line desk with a typed database: the ``env_class_code`` of the typed corpus (read as text, run only in the
sandbox). Pydantic models hold the database; line status is a ``(str, Enum)``, priority an ``IntEnum``, permissions a
``Flag``; the status counts are keyed by the enum. Tools refuse by raising ``ValueError`` (a pydantic
``ValidationError`` is one), except ``install_app``, whose decorator turns the raise into the answer
``"Error: <message>"``. ``check_installed_apps`` answers in the device's insertion order."""

import functools
from enum import Enum, Flag, IntEnum

from pydantic import BaseModel


class LineStatus(str, Enum):
    ACTIVE = "Active"
    SUSPENDED = "Suspended"
    CLOSED = "Closed"


class Priority(IntEnum):
    LOW = 1
    NORMAL = 2
    HIGH = 3


class Permission(Flag):
    NONE = 0
    CALLS = 1
    DATA = 2
    ROAMING = 4


class ApnSettings(BaseModel):
    apn_name: str
    mms: bool = False


class Line(BaseModel):
    line_id: str
    status: LineStatus
    priority: Priority = Priority.NORMAL
    permissions: Permission = Permission.CALLS
    apn: ApnSettings | None = None


class Device(BaseModel):
    apps: dict[str, bool]
    network_mode: str = "4g"


class PhoneDB(BaseModel):
    lines: dict[str, Line]
    device: Device
    status_counts: dict[LineStatus, int] = {}


def refusal_as_error(fn):
    """A refusal raised as ValueError becomes the answer "Error: <message>"."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except ValueError as exc:
            return f"Error: {exc}"

    return wrapper


class PhoneLines:
    """Phone lines of one account and the account's device."""

    db: PhoneDB

    def __init__(self):
        self.db = None

    def _line(self, line_id: str) -> Line:
        if line_id not in self.db.lines:
            raise ValueError(f"line {line_id} not found; valid lines: {', '.join(self.db.lines)}")
        return self.db.lines[line_id]

    def _count(self) -> None:
        counts = {}
        for line in self.db.lines.values():
            counts[line.status] = counts.get(line.status, 0) + 1
        self.db.status_counts = counts

    def get_line(self, line_id: str) -> dict:
        """One line's details."""
        return self._line(line_id)

    def set_line_status(self, line_id: str, status: str) -> str:
        """Change a line's status; a closed line cannot change."""
        line = self._line(line_id)
        new = LineStatus(status)
        if line.status is LineStatus.CLOSED:
            raise ValueError(f"line {line_id} is closed and cannot be changed")
        if line.status is new:
            raise ValueError(f"line {line_id} is already {new.value}")
        line.status = new
        self._count()
        return f"line {line_id} is now {new.value}"

    def set_priority(self, line_id: str, priority: int) -> str:
        """Set a line's priority (1, 2 or 3)."""
        line = self._line(line_id)
        line.priority = Priority(priority)
        return f"priority of {line_id} is {line.priority.name}"

    def grant_permission(self, line_id: str, permission: str) -> dict:
        """Grant one permission to a line."""
        line = self._line(line_id)
        names = [p.name for p in Permission if p.name != "NONE"]
        if permission not in names:
            raise ValueError(f"unknown permission {permission}; must be one of {', '.join(names)}")
        line.permissions = line.permissions | Permission[permission]
        return {"line_id": line_id, "permissions": line.permissions}

    def set_apn_settings(self, line_id: str, settings: dict) -> str:
        """Set a line's APN settings."""
        line = self._line(line_id)
        line.apn = ApnSettings.model_validate(settings)
        return f"APN of {line_id} set to {line.apn.apn_name}"

    def port_number(self, line_id: str, carrier: str) -> str:
        """Move a line to another carrier."""
        self._line(line_id)
        raise ValueError("porting is not allowed while the account is under contract")

    @refusal_as_error
    def install_app(self, name: str) -> str:
        """Install an app on the device."""
        if name in self.db.device.apps:
            raise ValueError(f"app {name} is already installed")
        self.db.device.apps[name] = True
        return f"installed {name}"

    def check_installed_apps(self) -> list:
        """The device's apps, in the order they were installed."""
        return list(self.db.device.apps)
