"""Canonical state snapshots (docs/definitions.md §4.1): plain JSON, deterministic and acyclic, keys in the
environment's own order (:func:`stored_json`) and hashed over the sorted form (:func:`canonical_json`).

* dict keys become strings; a non-string key whose ``str()`` clashes with another key is tagged with its type
  (``"<int>1"``); an Enum member is its ``value``, as a value and as a key;
* sets become sorted lists, tuples and deques lists, datetimes ISO strings; ``Decimal``/mpmath numbers,
  non-finite floats and integers beyond 2**53 are ``{"$decimal"|"$float"|"$int": "<text>"}``;
* objects become dicts of their public attributes; process machinery (:data:`BY_TYPE`) becomes
  ``{"$type": <public type name>, ...}`` with its stable fields; anything else is ``{"$repr": repr(v)}`` without
  memory addresses (:func:`without_addresses`);
* a cycle is cut: dropped from object attributes, ``{"$cycle": true}`` inside containers.
"""

from __future__ import annotations

import base64
import collections
import datetime as _dt
import enum
import functools
import hashlib
import io
import json
import math
import pickle
import re
import types
from collections.abc import Callable
from decimal import Decimal
from typing import Any

JSONValue = Any  # dict[str, JSONValue] | list[JSONValue] | str | int | float | bool | None

MAX_SAFE_INT = 2**53
MAX_DEPTH = 200

_LEAVES = (str, bool, type(None), int, float, Decimal)  # values that hold no reference back, subclasses too
_PLAIN = frozenset({str, bool, int, float, type(None)})  # exact types that hold no reference back


def canonicalize(value: Any) -> JSONValue:
    """Return the canonical JSON-able form of ``value`` (see module docstring)."""
    return _canon(value, [], 0)


# The containers being serialised, outermost first (cycle detection), compared with ``is``.
_Active = list


def _on(value: Any, active: _Active) -> bool:
    for a in active:
        if a is value:
            return True
    return False


def _canon(value: Any, active: _Active, depth: int) -> Any:
    t = type(value)
    # fast paths for plain JSON types (exact types; subclasses take the general path)
    if t is str or t is bool or value is None:
        return value
    if t is int:
        return value if -MAX_SAFE_INT <= value <= MAX_SAFE_INT else {"$int": str(value)}
    if t is float:
        return value if math.isfinite(value) else {"$float": repr(value)}
    if depth > MAX_DEPTH:
        return {"$truncated": t.__name__}
    if t is dict or t is list:
        if _on(value, active):
            return {"$cycle": True}
        active.append(value)
        try:
            if t is list:
                return [_canon(v, active, depth + 1) for v in value]
            return _canon_mapping(value, active, depth)
        finally:
            active.pop()
    return _canon_general(value, t, active, depth)


def _canon_general(value: Any, t: type, active: _Active, depth: int) -> Any:
    kind, how = _kind(t)
    if kind == "enum":  # before str/int: a (str, Enum) member is stored as its value
        return _canon(value.value, active, depth + 1)
    if kind == "scalar":  # a subclass of str/bool/int/float: the plain value
        return _canon(how(value), active, depth)
    if kind == "text":  # datetimes, Decimals, bytes, complex and number-like values: how they are written
        return how(value)
    if _on(value, active):
        return {"$cycle": True}
    active.append(value)
    try:
        if kind == "dict":
            return _canon_mapping(value, active, depth)
        if kind == "seq":
            return [_canon(v, active, depth + 1) for v in value]
        if kind == "set":
            return sorted([_canon(v, active, depth + 1) for v in value], key=canonical_json)
        if kind == "typed":
            return _canon_mapping(_typed_fields(value, *how), active, depth)
        attrs = object_state(value)
        if attrs is None:
            return {"$repr": _safe_repr(value, t)}
        # public attributes only; back-pointers to an enclosing object (Directory.parent) are dropped, not marked
        return {
            (k if type(k) is str else str(k)): _canon(v, active, depth + 1)
            for k, v in attrs.items()
            if isinstance(k, str) and k[:1] != "_" and (isinstance(v, _LEAVES) or not _on(v, active))
        }
    finally:
        active.pop()


def _decimal(value: Any) -> dict[str, str]:
    return {"$decimal": str(value)}


_MAX_KINDS = 4096  # classes an exec'd module creates anew at every reset must not pile up


@functools.lru_cache(maxsize=_MAX_KINDS)  # a state holds thousands of objects of a handful of classes
def _kind(t: type) -> tuple[str, Any]:
    """How a type other than the exact JSON ones is written (``(kind, how)``), in the order the module docstring
    gives (an Enum first, whatever it mixes in)."""
    if issubclass(t, enum.Enum):
        return "enum", None
    for base in (str, bool, int, float):  # bool before int: it is one
        if issubclass(t, base):
            return "scalar", base
    for bases, write in (
        ((_dt.datetime, _dt.date, _dt.time), lambda v: v.isoformat()),
        (Decimal, _decimal),
        ((bytes, bytearray), lambda v: {"$bytes": base64.b64encode(bytes(v)).decode("ascii")}),
        (complex, lambda v: {"$complex": repr(v)}),
    ):
        if issubclass(t, bases):
            return "text", write
    if issubclass(t, dict):
        return "dict", None
    if issubclass(t, (list, tuple, collections.deque)):
        return "seq", None
    if issubclass(t, (set, frozenset)):
        return "set", None
    module = getattr(t, "__module__", None)  # mpmath.mpf / numpy scalars and similar: numbers without public state
    if isinstance(module, str) and module.startswith(("mpmath", "numpy", "fractions")):  # written like a Decimal
        return "text", _decimal
    by_type = _by_type(t)
    return ("typed", by_type) if by_type is not None else ("object", None)


# -- objects canonicalised by type: their attributes are process machinery (mutexes, the logger tree, streams),
# so each is named by its public type and keeps only the fields an environment means by it.

Fields = Callable[[Any], dict[str, Any]]


def _no_fields(_value: Any) -> dict[str, Any]:
    return {}


def _logger_fields(value: Any) -> dict[str, Any]:
    return {"name": value.name, "level": value.level}


def _queue_fields(value: Any) -> dict[str, Any]:
    return {"maxsize": value.maxsize, "items": list(value.queue)}


def _semaphore_fields(value: Any) -> dict[str, Any]:
    return {"value": value._value}


#: ``(module, qualname)`` of a class (or of a base class) → (the ``$type`` written, its fields). The first class
#: of the MRO found here decides, so a subclass of ``queue.Queue`` defined by an environment is a queue.
BY_TYPE: dict[tuple[str, str], tuple[str, Fields]] = {
    ("_thread", "lock"): ("threading.Lock", lambda v: {"locked": v.locked()}),
    ("_thread", "RLock"): ("threading.RLock", _no_fields),  # its owner is a thread id: not state
    ("threading", "_RLock"): ("threading.RLock", _no_fields),
    ("threading", "Condition"): ("threading.Condition", _no_fields),
    ("threading", "Semaphore"): ("threading.Semaphore", _semaphore_fields),
    ("threading", "BoundedSemaphore"): ("threading.BoundedSemaphore", _semaphore_fields),
    ("threading", "Event"): ("threading.Event", lambda v: {"set": v.is_set()}),
    ("threading", "Barrier"): ("threading.Barrier", lambda v: {"parties": v.parties}),
    ("queue", "PriorityQueue"): ("queue.PriorityQueue", _queue_fields),
    ("queue", "LifoQueue"): ("queue.LifoQueue", _queue_fields),
    ("queue", "Queue"): ("queue.Queue", _queue_fields),
    ("_queue", "SimpleQueue"): ("queue.SimpleQueue", lambda v: {"size": v.qsize()}),
    ("queue", "_PySimpleQueue"): ("queue.SimpleQueue", lambda v: {"size": v.qsize()}),
    ("logging", "RootLogger"): ("logging.RootLogger", _logger_fields),
    ("logging", "Logger"): ("logging.Logger", _logger_fields),
    ("logging", "PlaceHolder"): ("logging.PlaceHolder", _no_fields),
    ("logging", "Manager"): ("logging.Manager", _no_fields),
    ("logging", "NullHandler"): ("logging.NullHandler", _logger_fields),
    ("logging", "FileHandler"): ("logging.FileHandler", _logger_fields),
    ("logging", "StreamHandler"): ("logging.StreamHandler", _logger_fields),
    ("logging", "Handler"): ("logging.Handler", _logger_fields),
    ("builtins", "module"): ("module", lambda v: {"name": v.__name__}),
}


def _by_type(t: type) -> tuple[str, Fields] | None:
    for base in t.__mro__:
        module, qualname = getattr(base, "__module__", None), getattr(base, "__qualname__", None)
        if isinstance(module, str) and isinstance(qualname, str):
            hit = BY_TYPE.get((module, qualname))
            if hit is not None:
                return hit
    return None


def _typed_fields(value: Any, name: str, fields: Fields) -> dict[str, Any]:
    try:
        found = fields(value)
    except Exception:  # a subclass that broke the base's attributes: the type alone
        found = {}
    return {"$type": name, **found}


_ADDRESS = re.compile(r" at 0x[0-9A-Fa-f]{4,}\b")  # CPython's default repr: "<... at 0x7f3a2b1c0d90>"


def without_addresses(text: str) -> str:
    """``text`` without the memory addresses of default reprs: ``<Foo object at 0x7f3a…>`` → ``<Foo object>``,
    ``<built-in method get of dict object at 0x…>`` → ``<built-in method get of dict object>``."""
    return _ADDRESS.sub("", text) if " at 0x" in text else text


def _safe_repr(value: Any, t: type) -> str:
    try:
        text = repr(value)
    except Exception:  # a broken __repr__ is the object's problem, not the snapshot's
        return f"<{t.__qualname__} object>"
    return without_addresses(text)


def _canon_mapping(mapping: Any, active: _Active, depth: int) -> dict[str, Any]:
    keys = list(mapping)  # in the mapping's own order: the stored form keeps it
    if all(type(k) is str for k in keys):
        return {k: _canon(mapping[k], active, depth + 1) for k in keys}
    str_keys = {k for k in keys if type(k) is str}
    out: dict[str, Any] = {}
    for key in keys:
        skey = key if type(key) is str else _key_text(key)
        if type(key) is not str and (skey in str_keys or skey in out):
            skey = f"<{type(key).__name__}>{skey}"
        out[skey] = _canon(mapping[key], active, depth + 1)
    return out


def _key_text(key: Any) -> str:
    if isinstance(key, enum.Enum):  # whatever it mixes in (str, int, Flag): the key is its value
        key = key.value
    if isinstance(key, (_dt.datetime, _dt.date, _dt.time)):
        return key.isoformat()
    if isinstance(key, tuple):
        return json.dumps(canonicalize(list(key)), separators=(",", ":"), ensure_ascii=False)
    return str(int(key)) if isinstance(key, int) and not isinstance(key, bool) else str(key)


def object_state(value: Any) -> dict[str, Any] | None:
    """An object's own state: what a ``__getstate__`` written in Python returns, else its ``__dict__`` with every
    set ``__slots__`` entry along its MRO; None when it has neither. It may be the object's own ``__dict__``: read
    it, do not change it."""
    getstate, slots = _reader(type(value))
    if getstate is not None:
        state = _state_mapping(getstate(value))
        if state is not None:
            return state
    own = getattr(value, "__dict__", None)
    if not slots and type(own) is dict:
        return own
    attrs = dict(own) if isinstance(own, dict) else {}
    for name in slots:
        try:
            attrs[name] = getattr(value, name)
        except AttributeError:  # a slot never set
            continue
    return attrs if isinstance(own, dict) or slots else None


def _state_mapping(state: Any) -> dict[str, Any] | None:
    """``__getstate__``'s value as one mapping (its slots part over its dict part), or None. A mapping carrying
    ``__dict__`` (pydantic's models) is that dict plus the mapping's own non-dunder keys."""
    if isinstance(state, tuple) and len(state) == 2 and all(p is None or isinstance(p, dict) for p in state):
        return {**(state[0] or {}), **(state[1] or {})}
    if isinstance(state, dict) and isinstance(state.get("__dict__"), dict):
        own = {k: v for k, v in state.items() if not (isinstance(k, str) and k.startswith("__") and k.endswith("__"))}
        return {**state["__dict__"], **own} if own else state["__dict__"]
    return dict(state) if isinstance(state, dict) else None


@functools.lru_cache(maxsize=_MAX_KINDS)
def _reader(cls: type) -> tuple[Callable[[Any], Any] | None, list[str]]:
    """How an object of ``cls`` is read (once per class): its Python ``__getstate__``, and its slot names."""
    getstate = getattr(cls, "__getstate__", None)
    if not isinstance(getstate, types.FunctionType):
        getstate = None
    elif (getstate.__module__, getstate.__qualname__) == ("pydantic.main", "BaseModel.__getstate__"):
        getstate = _pydantic_state  # what its mapping comes to (:func:`_state_mapping`), without building it
    return getstate, _slot_names(cls)


def _pydantic_state(value: Any) -> dict[str, Any]:
    """A pydantic model's fields: the ``__dict__`` its ``__getstate__`` carries, the rest of which are dunders."""
    return {"__dict__": value.__dict__}


def _slot_names(cls: type) -> list[str]:
    """The attribute names of every ``__slots__`` along ``cls``'s MRO (private names mangled as Python does)."""
    names: list[str] = []
    for klass in cls.__mro__:
        slots = klass.__dict__.get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name in ("__dict__", "__weakref__"):
                continue
            if name.startswith("__") and not name.endswith("__"):
                name = f"_{klass.__name__.lstrip('_')}{name}"
            if name not in names:
                names.append(name)
    return names


_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, sort_keys=True, allow_nan=False)
_STORED = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def canonical_json(value: JSONValue) -> str:
    """Serialise an already-canonical value to its unique compact JSON text, keys sorted: what is hashed."""
    return _ENCODER.encode(value)


def stored_json(value: JSONValue) -> str:
    """Serialise an already-canonical value to compact JSON in its own key order: how a state is stored."""
    return _STORED.encode(value)


def state_hash(value: JSONValue) -> str:
    """Content hash (BLAKE2b-128, hex) of a canonical value's JSON text."""
    return text_hash(canonical_json(value))


def text_hash(canonical_text: str) -> str:
    """The state hash of an already-serialised canonical JSON text."""
    return hashlib.blake2b(canonical_text.encode("utf-8"), digest_size=16).hexdigest()


class CanonicalTextCache:
    """``canonical_json`` (``ordered``: :func:`stored_json`) for states that share structure (a Δ replay's). Dicts
    above depth ``levels`` are composed from their children's texts, those at ``levels`` encoded whole; both are
    remembered by identity, so after a Δ only changed paths are serialised again. Do not mutate the states while
    the cache lives; one cache per trajectory."""

    def __init__(self, levels: int = 2, ordered: bool = False) -> None:
        self.levels = levels
        self.ordered = ordered
        self._encode = stored_json if ordered else canonical_json
        self._texts: dict[int, tuple[Any, str]] = {}  # id -> (object kept alive, its text)

    def text(self, value: JSONValue, depth: int = 0) -> str:
        if not isinstance(value, dict):
            return self._encode(value)
        hit = self._texts.get(id(value))
        if hit is not None and hit[0] is value:
            return hit[1]
        if depth >= self.levels:
            text = self._encode(value)
        else:
            text_of, below = self.text, depth + 1
            keys = value if self.ordered else sorted(value)
            text = "{" + ",".join([_key_json(k) + ":" + text_of(value[k], below) for k in keys]) + "}"
        self._texts[id(value)] = (value, text)
        return text

    def parse(self, text: str) -> JSONValue:
        """``json.loads`` of a text in the cache's form that also remembers the tracked dicts' texts (slices of
        ``text``), so the first state of a replay costs no serialisation."""
        value, end = self._parse(text, 0, 0)
        if end != len(text):
            raise ValueError("trailing data after the canonical JSON value")
        return value

    def _parse(self, text: str, start: int, depth: int) -> tuple[Any, int]:
        if depth >= self.levels or text[start] != "{":
            value, end = _DECODER.raw_decode(text, start)
            if depth == self.levels and isinstance(value, dict):
                self._texts[id(value)] = (value, text[start:end])
            return value, end
        value: dict[str, Any] = {}
        i = start + 1
        if text[i] == "}":
            i += 1
        else:
            while True:
                key, i = _scanstring(text, i + 1)  # text[i] is the key's opening quote
                value[key], i = self._parse(text, i + 1, depth + 1)  # text[i] is ':'
                if text[i] == "}":
                    i += 1
                    break
                i += 1  # ','
        self._texts[id(value)] = (value, text[start:i])
        return value, i


_DECODER = json.JSONDecoder()
_scanstring = json.decoder.scanstring  # type: ignore[attr-defined]
_key_json = json.encoder.encode_basestring  # type: ignore[attr-defined]  # what ensure_ascii=False uses for keys


class _PlainPickler(pickle.Pickler):
    """A pickler of plain data only (exact builtin containers and scalars, which the C pickler writes without
    asking :meth:`reducer_override`); any other object raises, as its pickle need not hold what its canonical form
    reads (a logger pickles as its name alone)."""

    def reducer_override(self, obj: Any) -> Any:
        raise pickle.PicklingError(type(obj).__qualname__)


def plain_pickle(value: Any) -> bytes:
    """``value``'s pickle when it is plain data (:class:`_PlainPickler`); raises otherwise."""
    buf = io.BytesIO()
    _PlainPickler(buf, protocol=5).dump(value)
    return buf.getvalue()


class Snapshots:
    """:func:`canonicalize` and :func:`stored_json` of one environment instance's successive states (its attribute
    mapping), computed again only for what changed. Each attribute (and each entry of a dict attribute) that is
    plain data is fingerprinted by its pickle (a tenth of canonicalising it); a byte-identical pickle at the same
    place keeps its canonical form and text, since equal pickles of plain data are equal structures of equal values.
    Anything else is canonicalised every time."""

    def __init__(self, levels: int = 2) -> None:
        self.levels = levels
        self._seen: dict[tuple[str, ...], tuple[bytes, JSONValue, str]] = {}
        self._refused: set[tuple[str, ...]] = set()

    def take(self, attrs: dict[str, Any]) -> tuple[JSONValue, str]:
        """``(canonicalize(attrs), stored_json(canonicalize(attrs)))``."""
        if not all(type(k) is str for k in attrs):
            value = canonicalize(attrs)
            return value, stored_json(value)
        return self._mapping((), attrs, [attrs], 0)

    def _mapping(self, path: tuple[str, ...], mapping: dict[str, Any], active: _Active, depth: int) -> tuple[Any, str]:
        value, texts = {}, []
        for key, item in mapping.items():
            value[key], text = self._item((*path, key), item, active, depth + 1)
            texts.append(_key_json(key) + ":" + text)
        return value, "{" + ",".join(texts) + "}"

    def _item(self, path: tuple[str, ...], item: Any, active: _Active, depth: int) -> tuple[Any, str]:
        if (
            len(path) < self.levels
            and type(item) is dict
            and not _on(item, active)
            and all(type(k) is str for k in item)
        ):
            active.append(item)
            try:
                return self._mapping(path, item, active, depth)
            finally:
                active.pop()
        if type(item) in _PLAIN:  # a scalar: nothing to keep
            value = _canon(item, active, depth)
            return value, stored_json(value)
        fingerprint = None
        if path not in self._refused:
            try:
                fingerprint = plain_pickle(item)
            except Exception:  # not plain data (an object, an Enum): canonicalised every time
                self._refused.add(path)
        seen = self._seen.get(path)
        if seen is not None and fingerprint is not None and seen[0] == fingerprint:
            return seen[1], seen[2]
        value = _canon(item, active, depth)
        text = stored_json(value)
        if fingerprint is not None:
            self._seen[path] = (fingerprint, value, text)
        return value, text
