"""Versioned splits: ``data/splits/<kind>/<version>/`` with a manifest, and an explicit CURRENT
pointer per kind (never "the latest file")."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from pipeline.store.layout import DataLayout, safe_name
from pipeline.store.parquet_io import atomic_path

BENCHMARK, MIXTURE = "benchmark", "sft_mixture"


class UnknownVersion(KeyError):
    def __str__(self) -> str:
        return str(self.args[0])


class EmptySelection(ValueError):
    """A selection (benchmark, mixture, export, evaluation) with no sample at all: what was asked, what
    was available and what removed it, instead of an error deep inside Arrow."""


def version_id(kind: str, spec: dict[str, Any]) -> str:
    digest = hashlib.blake2b(json.dumps(spec, sort_keys=True).encode(), digest_size=6).hexdigest()
    return f"{'bench' if kind == BENCHMARK else 'sft'}-{digest}"


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
            raise UnknownVersion(
                f"{self.kind} version {version!r} does not exist; known: {self.versions() or 'none'}"
            )
        return json.loads(path.read_text())

    def write_manifest(self, version: str, manifest: dict[str, Any]) -> None:
        with atomic_path(self.dir(version) / "manifest.json") as tmp:
            tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True))

    def versions(self) -> list[str]:
        if not self.root.exists():
            return []
        return sorted(p.parent.name for p in self.root.glob("*/manifest.json"))

    def current(self) -> str | None:
        pointer = self.root / "CURRENT"
        return pointer.read_text().strip() if pointer.exists() else None

    def set_current(self, version: str) -> None:
        self.manifest(version)  # must exist
        with atomic_path(self.root / "CURRENT") as tmp:
            tmp.write_text(version + "\n")

    def current_seed(self) -> int | None:
        current = self.current()
        return None if current is None else int(self.manifest(current)["spec"]["seed"])

    def resolve(self, version: str | None) -> str:
        """``version`` if it exists, else the CURRENT one; a precise error otherwise."""
        if version:
            self.manifest(version)
            return version
        current = self.current()
        if current is None:
            raise UnknownVersion(f"no current {self.kind} version; materialize it first (known: {self.versions() or 'none'})")
        return current
