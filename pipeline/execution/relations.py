"""The relations a state holds, learned from the state itself: which values belong to one record
(docs/environments.md, "Exploration", says how they are drawn).

:class:`Records` indexes every record of a canonical state with the values under each field name inside it;
:func:`bind` draws the arguments of one call from records. Nothing here knows a corpus; all choices go through
the caller's ``random``.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: records indexed at most (a huge state is indexed in part)
MAX_RECORDS = 4_000
#: values kept per field of one record
FIELD_CAP = 64
_ID = re.compile(r"(^|_)ids?$|[a-z]Ids?$|ID$")
_WORD = re.compile(r"[A-Za-z][A-Za-z_-]{2,}")


def singular(name: str) -> str:
    if name.endswith("_ids"):
        return name[:-1]
    if name.endswith("ies"):
        return name[:-3] + "y"
    if name.endswith("s") and not name.endswith("ss"):
        return name[:-1]
    return name


def id_like(name: str) -> bool:
    """Whether a parameter or field name names an id (``order_id``, ``item_ids``, ``id``, ``userId``)."""
    return bool(_ID.search(name))


def unset_id(name: str, value: Any) -> bool:
    """Whether ``value`` under the field ``name`` is an id not set yet (``"archivist_id": ""``)."""
    return value == "" and id_like(name)


def _base(name: str) -> str:
    """``order_id`` → ``order``, ``item_ids`` → ``item``."""
    for suffix in ("_ids", "_id"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return singular(name)


_PLAIN_SCALARS = frozenset({str, int, float})  # exact types: a leaf without the checks a subclass needs


def _scalar(value: Any) -> bool:
    return isinstance(value, (str, int, float)) and not isinstance(value, bool)


def is_mapping(node: dict) -> bool:
    """A dict keyed by ids rather than by field names: its values are all records of one shape (:func:`one_shape`),
    or scalars some of which are None (free spots), or its keys all carry digits (``A1``, ``u_12``)."""
    if not node:
        return False
    values = list(node.values())
    if all(isinstance(v, dict) for v in values) and one_shape(node):
        return True
    if all(v is None or _scalar(v) for v in values) and any(v is None for v in values):
        return True
    return len(node) >= 2 and all(any(ch.isdigit() for ch in str(k)) for k in node)


class MappingMemo:
    """:func:`is_mapping` for the successive states of one episode, which share their unchanged (never changed)
    subtrees: remembered by identity, the dict kept alive."""

    LIMIT = 100_000

    def __init__(self) -> None:
        self._seen: dict[int, tuple[dict, bool]] = {}

    def __call__(self, node: dict) -> bool:
        hit = self._seen.get(id(node))
        if hit is not None and hit[0] is node:
            return hit[1]
        if len(self._seen) >= self.LIMIT:
            self._seen.clear()
        found = is_mapping(node)
        self._seen[id(node)] = (node, found)
        return found


def one_shape(node: dict) -> bool:
    """Whether a dict's values are records of a common shape: the fields all hold are at least half of the smallest
    one's, or (one record) it holds its own key as a value, or its key carries a digit."""
    shapes = [set(map(str, v)) for v in node.values() if isinstance(v, dict)]
    if len(shapes) != len(node) or not shapes:
        return False
    if len(shapes) == 1:
        key, value = next(iter(node.items()))
        return any(ch.isdigit() for ch in str(key)) or key in value.values()
    common = set.intersection(*shapes)
    return 2 * len(common) >= min(len(s) for s in shapes)


@dataclass
class Record:
    """One record: the values under each field name anywhere inside it (first seen first)."""

    parent: int | None
    depth: int
    fields: dict[str, dict[Any, None]] = field(default_factory=dict)
    values: set[Any] = field(default_factory=set)
    size: int = 0


class Records:
    """Every record of a canonical state (record 0: the state itself)."""

    def __init__(self, state: Any, mapping: Callable[[dict], bool] = is_mapping) -> None:
        self.records: list[Record] = [Record(None, 0)]
        self._aliases: dict[str, tuple[str, ...]] = {}
        self._is_mapping = mapping  # is_mapping, or a MappingMemo of the episode's states
        if isinstance(state, dict):
            for key, value in state.items():
                self._walk(value, str(key), [0], 1)
        else:
            self._walk(state, None, [0], 1)

    # -- indexing -----------------------------------------------------------------------------------------

    def _new(self, chain: list[int]) -> int:
        self.records.append(Record(chain[-1], len(chain)))
        return len(self.records) - 1

    def _leaf(self, chain: Iterable[int], name: str, value: Any) -> None:
        records = self.records
        for r in chain:
            rec = records[r]
            bucket = rec.fields.get(name)
            if bucket is None:
                rec.fields[name] = {value: None}
            elif len(bucket) < FIELD_CAP:
                bucket[value] = None
            rec.values.add(value)
            rec.size += 1

    def _fields(self, node: dict, chain: list[int], depth: int) -> None:
        """A record's fields: scalars straight to its chain, the rest walked."""
        for k, v in node.items():
            name = k if type(k) is str else str(k)
            if type(v) in _PLAIN_SCALARS:  # as :meth:`_walk` would take it, one level down
                if depth < 8 and len(self.records) < MAX_RECORDS and not unset_id(name, v):
                    self._leaf(chain, name, v)
            else:
                self._walk(v, name, chain, depth + 1)

    def _walk(self, node: Any, name: str | None, chain: list[int], depth: int) -> None:
        if depth > 8 or len(self.records) >= MAX_RECORDS:
            return
        if isinstance(node, dict):
            if name is not None and self._is_mapping(node):
                key_field = singular(name) if id_like(name) else f"{singular(name)}_id"
                for key, value in list(node.items())[: FIELD_CAP * 4]:
                    r = self._new(chain)
                    inner = [*chain, r]
                    # the key is the entity's id, unless the entity holds a field of that name (order lines keyed
                    # L1, L2 that each hold an item_id): then it is only the entity's key
                    own = isinstance(value, dict) and key_field in value
                    self._leaf(inner, f"{singular(name)}_key" if own else key_field, str(key))
                    if isinstance(value, dict):
                        self._fields(value, inner, depth)
                    elif _scalar(value):
                        self._leaf(inner, singular(name), value)
                return
            r = self._new(chain)
            self._fields(node, [*chain, r], depth)
        elif isinstance(node, list):
            for item in node[:FIELD_CAP]:
                if _scalar(item) and name is not None:
                    self._leaf(chain, name, item)
                    if singular(name) != name:
                        self._leaf(chain, singular(name), item)
                elif isinstance(item, (dict, list)):
                    self._walk(item, name, chain, depth + 1)
        elif name is not None and _scalar(node) and not unset_id(name, node):
            self._leaf(chain, name, node)

    # -- names --------------------------------------------------------------------------------------------

    def aliases(self, param: str) -> tuple[str, ...]:
        """The field names a parameter may mean, most specific first: as written, singular, without or with an id
        suffix, then fields it ends with (``new_item_ids`` → ``item_id``, ``from_course_id`` → ``courses``)."""
        if param not in self._aliases:
            single, base = singular(param), _base(param)
            names = [param, single, base, f"{base}_id", f"{base}s", f"{base}_ids"]
            known = self.records[0].fields

            def ends(f: str) -> bool:  # a field it ends with, or the list of such ids (``from_course_id``: ``courses``)
                return any(n.endswith("_" + f) or n.endswith(f"_{singular(f)}_id") for n in (single, param))

            suffixed = sorted(
                (f for f in known if len(f) >= 2 and f not in names and ends(f)), key=lambda f: (-len(f), f)
            )
            self._aliases[param] = tuple(dict.fromkeys([n for n in names if n in known] + suffixed))
        return self._aliases[param]

    def qualified(self, param: str) -> bool:
        """Whether the parameter means its field only through a suffix (``new_item_ids``: a second item id)."""
        first = self.aliases(param)[:1]
        return bool(first) and first[0] not in (param, singular(param), _base(param), f"{_base(param)}_id")

    def values_of(self, r: int, param: str) -> list[Any]:
        rec = self.records[r]
        for name in self.aliases(param):
            if name in rec.fields:
                return list(rec.fields[name])
        return []

    def covers(self, r: int, param: str) -> bool:
        rec = self.records[r]
        return any(name in rec.fields for name in self.aliases(param))

    def ancestors(self, r: int) -> Iterable[int]:
        parent = self.records[r].parent
        while parent is not None:
            yield parent
            parent = self.records[parent].parent


def _pick_record(
    records: Records,
    params: list[str],
    rng: random.Random,
    exclude: set[int] = frozenset(),
    holding: Iterable[Any] = (),
    prefer: Iterable[Any] = (),
) -> tuple[int, list[str]] | None:
    """The smallest record holding the most of ``params`` (random among the equally good), one that holds a value
    of ``holding`` (a join) and, when some do, of ``prefer``; None when no record but the state holds any."""
    holding = [v for v in holding if v is not None]
    covered: dict[int, tuple[str, ...]] = {}
    for r in range(1, len(records.records)):
        if r in exclude:
            continue
        rec = records.records[r]
        if holding and not any(v in rec.values for v in holding):
            continue
        have = tuple(p for p in params if records.covers(r, p))
        if have:
            covered[r] = have
    if not covered:
        return None
    wanted = [v for v in prefer if v is not None]
    if wanted:
        preferred = {r: c for r, c in covered.items() if any(v in records.records[r].values for v in wanted)}
        if preferred and rng.random() < 0.8:
            covered = preferred
    best = max(len(c) for c in covered.values())
    top = [r for r, c in covered.items() if len(c) == best]
    above = {a for r in top for a in records.ancestors(r)}
    smallest = [r for r in top if r not in above] or top
    r = smallest[rng.randrange(len(smallest))]
    return r, list(covered[r])


@dataclass
class Hints:
    """What earlier calls taught one tool: values to avoid per argument and values a record should hold (both
    named by refusals), and the episode's focus (values earlier calls answered or used)."""

    avoid: dict[str, set[Any]] = field(default_factory=dict)
    prefer: list[Any] = field(default_factory=list)
    focus: list[Any] = field(default_factory=list)
    #: values a refusal listed as the valid ones, per argument (:func:`valid_values`)
    suggest: dict[str, list[Any]] = field(default_factory=dict)


#: where a refusal starts listing the valid values ("must be one of", "valid modes are", "available: ")
_LISTING = re.compile(
    r"(?:must\s+be\s+(?:one\s+of|in)|(?:expected|choose|pick)\s+(?:one\s+of|from)|one\s+of"
    r"|\bvalid\b[\w\s-]{0,40}?(?:\bare\b|\bis\b|:)|\b(?:available|allowed|supported|options?|choices)\b"
    r"[\w\s-]{0,40}?(?:\bare\b|\bis\b|:))\s*:?\s*",
    re.IGNORECASE,
)
_QUOTED = re.compile(r"'([^'\n]{1,64})'|\"([^\"\n]{1,64})\"")
_END = re.compile(r"\.(?:\s|$)|\n|;|\)\s*$")
_SEP = re.compile(r"\s*(?:,|\||/|\bor\b|\band\b)\s*")


def valid_values(text: str) -> list[str]:
    """The values a refusal lists as valid ("must be one of …", "available: …"): the quoted items, or the
    separated words, up to the end of the sentence."""
    out: list[str] = []
    for match in _LISTING.finditer(text):
        rest = text[match.end() :]
        end = _END.search(rest)
        segment = rest[: end.start()] if end else rest
        quoted = [a or b for a, b in _QUOTED.findall(segment)]
        items = quoted or [p.strip(" []{}()'\"`") for p in _SEP.split(segment)]
        out.extend(i for i in items if i and len(i) <= 64 and i not in out)
    return out


def refusal_hints(refusals: Iterable[Mapping[str, Any]], records: Records) -> Hints:
    """Hints from refusals ``{"text", "args"}``: an argument value the text names is avoided; a word of the text
    the state holds as a value (``pending``) is a condition a record should meet."""
    hints = Hints()
    state_values = records.records[0].values
    for refusal in refusals:
        text = str(refusal.get("text", ""))
        args = refusal.get("args") or {}
        named: set[Any] = set()
        for param, value in args.items():
            for v in value if isinstance(value, list) else [value]:
                if isinstance(v, str) and len(v) >= 2 and v in text:
                    hints.avoid.setdefault(param, set()).add(v)
                    named.add(v)
        for word in _WORD.findall(text):
            if word in state_values and word not in named and word not in hints.prefer:
                hints.prefer.append(word)
        listed = valid_values(text)
        for param in _listed_for(args, named, text) if listed else ():
            bucket = hints.suggest.setdefault(param, [])
            bucket.extend(v for v in listed if v not in bucket)
    return hints


def _listed_for(args: Mapping[str, Any], named: set[Any], text: str) -> list[str]:
    """The arguments a refusal's list of valid values is for: those whose value, else whose name, it names, else
    the only argument."""
    by_value = [p for p, v in args.items() if any(x in named for x in (v if isinstance(v, list) else [v]))]
    if by_value:
        return by_value
    lowered = text.lower()
    by_name = [p for p in args if _base(p).replace("_", " ") in lowered or p in lowered]
    return by_name or (list(args) if len(args) == 1 else [])


def bind(
    records: Records,
    params: list[str],
    fits: Mapping[str, Any],
    rng: random.Random,
    sizes: Mapping[str, tuple[int, int]],
    hints: Hints | None = None,
    returned: Iterable[Records] = (),
) -> dict[str, Any]:
    """Values for ``params`` drawn from related records: ids from one record (joined on a value drawn already
    where it lacks one; a second id of a kind its sibling), plain values together from another, earlier answers
    as candidates. A parameter no record fits is left out. ``sizes[param]``: a list parameter's (min, max)."""
    draw = _Draw(records, fits, rng, sizes, hints or Hints())
    draw.answered(params, returned)
    todo = [p for p in params if p not in draw.out and records.aliases(p)]
    ids = [p for p in todo if id_like(p) or id_like(records.aliases(p)[0])]
    primary, followers = _firsts(records, ids, sizes)
    anchor = draw.primary(primary) if primary else None
    draw.siblings(followers, anchor)
    plain = [p for p in todo if p not in ids]
    picked = _pick_record(records, plain, rng, exclude=set()) if plain else None
    if picked is not None:
        draw.take(*picked)  # the plain values together, from one record
    return draw.out


def _firsts(
    records: Records, ids: list[str], sizes: Mapping[str, tuple[int, int]]
) -> tuple[list[str], list[tuple[str, str]]]:
    """The id arguments drawn from one record (none when all are lists), and (second, first) of a field named twice."""
    field_of = {p: records.aliases(p)[0] for p in ids}
    firsts: dict[str, str] = {}
    followers: list[tuple[str, str]] = []
    for p in sorted(ids, key=lambda p: (records.qualified(p), ids.index(p))):
        if field_of[p] in firsts:
            followers.append((p, firsts[field_of[p]]))
        else:
            firsts[field_of[p]] = p
    primary = [p for p in ids if p in firsts.values()]
    return ([] if all(p in sizes for p in primary) else primary), followers


class _Draw:
    """The arguments :func:`bind` has drawn (``out``), with what it draws them by."""

    def __init__(
        self, records: Records, fits: Any, rng: random.Random, sizes: Mapping[str, tuple[int, int]], hints: Hints
    ) -> None:
        self.records, self.fits, self.rng, self.sizes, self.hints = records, fits, rng, sizes, hints
        self.out: dict[str, Any] = {}

    def value(self, param: str, values: list[Any]) -> Any:
        """One of ``values`` that fits ``param`` (a list of them for a list parameter), not one a refusal named."""
        typed = [v for v in values if self.fits(param, v)]
        values = [v for v in typed if v not in self.hints.avoid.get(param, ())] or typed
        if not values:
            return None
        if param in self.sizes:
            lo, hi = self.sizes[param]
            k = self.rng.randint(min(lo, len(values)), max(1, min(hi, len(values))))
            return self.rng.sample(values, k)
        return values[self.rng.randrange(len(values))]

    def take(self, record: int, names: Iterable[str]) -> None:
        for p in names:
            value = self.value(p, self.records.values_of(record, p))
            if value is not None:
                self.out[p] = value

    def answered(self, params: list[str], returned: Iterable[Records]) -> None:
        """A value an earlier call answered under the argument's name (a bundle), always when the state has none."""
        for answer in returned:
            for param in params:
                vals = answer.values_of(0, param) if param not in self.out else None
                if vals and (not self.records.aliases(param) or self.rng.random() < 0.5):
                    value = self.value(param, vals)
                    if value is not None:
                        self.out[param] = value

    def primary(self, primary: list[str]) -> int | None:
        """The id arguments from one record (returned: the anchor); one it lacks joined on a value drawn already."""
        records, rng, prefer = self.records, self.rng, self.hints.prefer
        focus = self.hints.focus if self.hints.focus and rng.random() < 0.5 else ()
        picked = _pick_record(records, primary, rng, holding=focus, prefer=prefer) or (
            _pick_record(records, primary, rng, prefer=prefer) if focus else None
        )
        anchor = None
        if picked is not None:
            anchor, have = picked
            self.take(anchor, have)
        bound = _flat(self.out.values())
        for p in primary:  # the record that holds both
            if p in self.out or not bound:
                continue
            joined = _pick_record(records, [p], rng, exclude={anchor} if anchor else set(), holding=bound)
            if joined is not None:
                self.take(joined[0], [p])
        return anchor

    def siblings(self, followers: list[tuple[str, str]], anchor: int | None) -> None:
        """A second argument of a field already named: a sibling of the first one's value."""
        for p, first in followers:
            if first not in self.out:
                continue
            taken = self.out[first] if isinstance(self.out[first], list) else [self.out[first]]
            found = [_sibling(self.records, v, set(taken), anchor, self.rng) for v in taken]
            found = [s for s in found if s is not None and self.fits(p, s)]
            if found:
                self.out[p] = found if p in self.sizes else found[0]


def _flat(values: Iterable[Any]) -> list[Any]:
    return [x for v in values for x in (v if isinstance(v, list) else [v]) if _scalar(x)]


def _sibling(records: Records, value: Any, taken: set[Any], anchor: int | None, rng: random.Random) -> Any:
    """Another value of the field that holds ``value`` in the smallest record (not the anchor's line) listing
    several."""
    skip = {anchor, 0} | (set(records.ancestors(anchor)) if anchor is not None else set())
    best: tuple[int, int, list[Any]] | None = None
    for r in range(1, len(records.records)):
        if r in skip:
            continue
        rec = records.records[r]
        if value not in rec.values:
            continue
        for bucket in rec.fields.values():
            if value in bucket and len(bucket) >= 2:
                others = [v for v in bucket if v not in taken]
                if others and (best is None or rec.size < best[0]):
                    best = (rec.size, r, others)
    if best is None:
        return None
    return best[2][rng.randrange(len(best[2]))]
