"""One registry for every extension point: named entries in registration order, the project's own first, then
those of installed plugin packages (entry-point group ``envsim_forge.<point>``, docs/extending.md), loaded on the
registry's first read in name order; an entry point that is a class is instantiated with no arguments, and one that
fails to load fails the read naming it and its package.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from importlib import metadata
from typing import Generic, TypeVar

T = TypeVar("T")

#: every entry-point group of this project starts with this (``envsim_forge.sources``, ``envsim_forge.simulators``)
GROUP_PREFIX = "envsim_forge."


class PluginError(RuntimeError):
    """An installed plugin's entry point could not be loaded or is not an entry of its registry."""


def _entry_points(group: str) -> list[metadata.EntryPoint]:
    """The group's entry points, one per name (the first on ``sys.path`` wins, as for imports), by name."""
    found: dict[str, metadata.EntryPoint] = {}
    for ep in metadata.entry_points(group=group):
        found.setdefault(ep.name, ep)
    return [found[name] for name in sorted(found)]


def _package(ep: metadata.EntryPoint) -> str:
    dist = ep.dist
    return f"{dist.metadata['Name']} {dist.version}" if dist is not None else "an unknown package"


class Registry(Generic[T]):
    """Entries of one extension point by name, in registration order. ``kind`` names an entry in messages;
    ``check`` refuses an object that is not an entry; ``on_add`` / ``on_remove`` are told of each registration."""

    def __init__(
        self,
        kind: str,
        group: str,
        *,
        name: Callable[[T], str] = lambda entry: entry.name,
        check: Callable[[object], bool] | None = None,
        on_add: Callable[[T], None] | None = None,
        on_remove: Callable[[T], None] | None = None,
    ) -> None:
        if not group.startswith(GROUP_PREFIX):
            raise ValueError(f"entry-point group {group!r} must start with {GROUP_PREFIX!r}")
        self.kind, self.group = kind, group
        self._name, self._check, self._on_add, self._on_remove = name, check, on_add, on_remove
        self._entries: dict[str, T] = {}
        self._plugins_loaded = False

    def register(self, entry: T) -> T:
        """Add ``entry`` after the others (its name must be new). Returns it."""
        name = self._name(entry)
        if name in self._entries:
            raise ValueError(f"{self.kind} {name!r} is registered already")
        self._entries[name] = entry
        if self._on_add is not None:
            self._on_add(entry)
        return entry

    def unregister(self, name: str) -> None:
        """Remove the entry ``name`` (a test's temporary entry); no error when there is none."""
        entry = self._entries.pop(name, None)
        if entry is not None and self._on_remove is not None:
            self._on_remove(entry)

    def _all(self) -> dict[str, T]:
        """The entries, those of the installed plugins registered on the first read."""
        if self._plugins_loaded:
            return self._entries
        self._plugins_loaded = True
        for ep in _entry_points(self.group):
            where = f"plugin entry point {ep.name} = {ep.value} ({self.group}, from {_package(ep)})"
            try:
                obj = ep.load()
                entry = obj() if isinstance(obj, type) else obj
            except Exception as exc:
                raise PluginError(f"{where} failed to load: {type(exc).__name__}: {exc}") from exc
            if self._check is not None and not self._check(entry):
                raise PluginError(f"{where} is not a {self.kind} but {type(entry).__name__}")
            if self._name(entry) != ep.name:
                raise PluginError(
                    f"{where} registers the name {self._name(entry)!r}: name the entry point "
                    f"{self._name(entry)!r} (the entry's own name)"
                )
            self.register(entry)
        return self._entries

    def get(self, name: str) -> T:
        """The entry ``name``, or a KeyError that names the known ones."""
        entries = self._all()
        try:
            return entries[name]
        except KeyError:
            raise KeyError(f"unknown {self.kind} {name!r}; known: {sorted(entries)}") from None

    def find(self, name: str) -> T | None:
        """The entry ``name``, or None."""
        return self._all().get(name)

    def names(self) -> tuple[str, ...]:
        return tuple(self._all())

    def values(self) -> list[T]:
        return list(self._all().values())

    def items(self) -> list[tuple[str, T]]:
        return list(self._all().items())

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __contains__(self, name: object) -> bool:
        return name in self._all()

    def __getitem__(self, name: str) -> T:
        return self.get(name)

    def __len__(self) -> int:
        return len(self._all())

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {self.group!r}, {list(self._entries)})"


def plugin_paths() -> tuple[str, ...]:
    """The ``sys.path`` directories (in order) of the installed packages with an entry point in one of this
    project's groups: what the sandbox worker, with a ``sys.path`` of its own, needs to import every plugin."""
    groups = sorted(g for g in metadata.entry_points().groups if g.startswith(GROUP_PREFIX))
    dirs: set[str] = set()
    for group in groups:
        for ep in _entry_points(group):
            located = ep.dist.locate_file("") if ep.dist is not None else None
            if located is not None:
                dirs.add(os.path.realpath(str(located)))
    return tuple(p for p in dict.fromkeys(os.path.realpath(s) for s in sys.path if s) if p in dirs)
