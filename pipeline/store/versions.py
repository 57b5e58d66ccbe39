"""Versioned splits: ``data/splits/<kind>/<version>/`` with a manifest, and an explicit CURRENT pointer per kind.
Provenance (when a version was first written, by which run, its parent: the version current when it was first made
current, so the lineage is acyclic) is appended to ``history.jsonl``, never written into the version: same seed and
input, same bytes."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pipeline.store.jsonl import read_rows
from pipeline.store.kinds import BENCHMARK, CURRICULUM, MIXTURE, SPLIT_KINDS, split_kind  # noqa: F401 (re-exported)
from pipeline.store.layout import DataLayout, safe_name
from pipeline.store.parquet_io import atomic_path

#: events of ``history.jsonl``: a version first written, a version made current
CREATED, MADE_CURRENT = "created", "made_current"
#: a draw the corpus could not fill at all: no version, the product skipped with its reason (history.jsonl)
SKIPPED = "skipped"


class UnknownVersion(KeyError):
    def __str__(self) -> str:
        return str(self.args[0])


class EmptySelection(ValueError):
    """A selection (benchmark, mixture, export, evaluation) with no sample at all: what was asked, what
    was available and what removed it, instead of an error deep inside Arrow."""


def version_id(kind: str, spec: dict[str, Any]) -> str:
    """``<the kind's prefix>-<digest of spec>``: the same spec gives the same id."""
    digest = hashlib.blake2b(json.dumps(spec, sort_keys=True).encode(), digest_size=6).hexdigest()
    return f"{split_kind(kind).prefix}-{digest}"


class SplitStore:
    def __init__(self, layout: DataLayout, kind: str) -> None:
        self.kind = kind
        self.root = layout.splits_dir(kind)

    def dir(self, version: str) -> Path:
        return self.root / safe_name(version, f"{self.kind} version")

    def samples(self, version: str) -> Path:
        return self.dir(version) / "samples.parquet"

    def manifest(self, version: str) -> dict[str, Any]:
        path = self.dir(version) / "manifest.json"
        if not path.exists():
            raise UnknownVersion(f"{self.kind} version {version!r} does not exist; known: {self.versions() or 'none'}")
        return json.loads(path.read_text())

    def write_manifest(self, version: str, manifest: dict[str, Any]) -> None:
        with atomic_path(self.dir(version) / "manifest.json") as tmp:
            tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True))

    def versions(self) -> list[str]:
        return sorted(p.parent.name for p in self.root.glob("*/manifest.json"))

    def current(self) -> str | None:
        pointer = self.root / "CURRENT"
        return pointer.read_text().strip() if pointer.exists() else None

    def set_current(self, version: str, dagster_run_id: str | None = None) -> str | None:
        """Point CURRENT at ``version``; a change is logged with the version it replaces (``previous``; on the
        version's first time also as its ``parent``). Returns the version current before."""
        self.manifest(version)  # must exist
        previous = self.current()
        with atomic_path(self.root / "CURRENT") as tmp:
            tmp.write_text(version + "\n")
        if previous != version:
            first = not any(e.get("event") == MADE_CURRENT and e.get("version") == version for e in self.history())
            self.log(
                MADE_CURRENT, version, dagster_run_id, previous=previous, **({"parent": previous} if first else {})
            )
        return previous

    def changes_by(self, dagster_run_id: str) -> tuple[str | None, str] | None:
        """``(before, after)`` of CURRENT over the ``made_current`` events of one Dagster run (the first event's
        previous version, the last event's version); None when that run did not change CURRENT."""
        events = [
            e for e in self.history() if e.get("event") == MADE_CURRENT and e.get("dagster_run_id") == dagster_run_id
        ]
        if not events:
            return None
        first = events[0]
        return first.get("previous", first.get("parent")), events[-1]["version"]

    @property
    def history_path(self) -> Path:
        return self.root / "history.jsonl"

    def log(self, event: str, version: str, dagster_run_id: str | None = None, **extra: Any) -> None:
        """Append one event (``created`` / ``made_current``) to ``history.jsonl`` with the time and run."""
        self.root.mkdir(parents=True, exist_ok=True)
        record = {
            "event": event,
            "version": version,
            "at": datetime.now(UTC).isoformat(timespec="microseconds"),
            "dagster_run_id": dagster_run_id,
            **extra,
        }
        with self.history_path.open("a") as fh:
            fh.write(json.dumps(record, sort_keys=True) + "\n")

    def history(self) -> list[dict[str, Any]]:
        """The events in file order (a line cut by a crash left out: the rest still counts)."""
        return list(read_rows(self.history_path))

    def skipped(self, version: str, reason: str, dagster_run_id: str | None = None) -> None:
        """Log that the draw ``version`` selected no sample, so no version was written: the product is skipped."""
        self.log(SKIPPED, version, dagster_run_id, reason=reason)

    def skip_reason(self, dagster_run_id: str | None = None) -> str | None:
        """Why the product was skipped by the Dagster run ``dagster_run_id`` (none: by the last draw), or None."""
        events = [e for e in self.history() if e.get("event") in (SKIPPED, MADE_CURRENT, CREATED)]
        if dagster_run_id is not None:
            events = [e for e in events if e.get("dagster_run_id") == dagster_run_id]
        last = events[-1] if events else {}
        return last.get("reason") if last.get("event") == SKIPPED else None

    def created(self, version: str, dagster_run_id: str | None = None) -> None:
        """Log that ``version`` was written, unless it was before (a regenerated version keeps its first time)."""
        if not any(e.get("event") == CREATED and e.get("version") == version for e in self.history()):
            self.log(CREATED, version, dagster_run_id)

    def provenance(self) -> dict[str, dict[str, Any]]:
        """Per version: ``created_at`` (first ``created`` event, else the manifest's mtime), ``dagster_run_id`` (the
        run that created it) and ``parent_version`` (the version current when it was first made current: histories
        written before ``previous`` existed logged every change as ``parent``, and the first one counts)."""
        out: dict[str, dict[str, Any]] = {}
        made_current: set[str] = set()
        blank = {"created_at": None, "dagster_run_id": None, "parent_version": None}
        for event in self.history():
            if event.get("event") not in (CREATED, MADE_CURRENT):  # a skipped draw wrote no version
                continue
            row = out.setdefault(version := event.get("version"), dict(blank))
            if event.get("event") == CREATED and row["created_at"] is None:
                row["created_at"], row["dagster_run_id"] = event.get("at"), event.get("dagster_run_id")
            elif event.get("event") == MADE_CURRENT and version not in made_current:
                row["parent_version"] = event.get("parent")
                made_current.add(version)
        for version in self.versions():
            row = out.setdefault(version, dict(blank))
            if row["created_at"] is None:
                mtime = (self.dir(version) / "manifest.json").stat().st_mtime
                row["created_at"] = datetime.fromtimestamp(mtime, UTC).isoformat(timespec="microseconds")
        return out

    def current_seed(self) -> int | None:
        current = self.current()
        return None if current is None else int(self.manifest(current)["spec"]["seed"])

    def seed(self, seed: int | None) -> int:
        """The seed a new draw uses: ``seed`` when given, else the CURRENT version's (0 when there is none), so a
        plain run on the same input draws the CURRENT version again."""
        return seed if seed is not None else self.current_seed() or 0

    def resolve(self, version: str | None) -> str:
        """``version`` if it exists, else the CURRENT one; a precise error otherwise."""
        if version:
            self.manifest(version)
            return version
        current = self.current()
        if current is None:
            raise UnknownVersion(
                f"no current {self.kind} version; materialize it first (known: {self.versions() or 'none'})"
            )
        return current
