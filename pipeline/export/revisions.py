"""Split versions exported side by side, like Hub revisions: ``export/<kind>/<version>/`` per version and
``export/<kind>/current``, a relative link to the version exported last.

Re-running with a new seed or composition exports the new version next to the old ones and moves ``current``; exporting
a version that is already there with the same options is a no-op. An export of the old flat layout (``export/<kind>/``
holding one version's files) is moved into its version's directory first, so nothing is lost on upgrade.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.core.protocol import PROTOCOL_VERSION
from pipeline.export.hf_layout import MARKER, ExportReport, export_split
from pipeline.store.layout import DataLayout
from pipeline.store.versions import SplitStore, split_kind


@dataclass
class Revision:
    report: ExportReport
    #: the version's directory already held this export (same options): nothing was written
    unchanged: bool
    current: Path


def _marker(directory: Path) -> dict[str, Any] | None:
    try:
        return json.loads((directory / MARKER).read_text())
    except (OSError, ValueError):
        return None


def migrate_flat(layout: DataLayout, kind: str) -> Path | None:
    """Move an export of the flat layout (files directly in ``export/<kind>/``) into its version's
    directory and point ``current`` at it; the moved directory, or None when there was none."""
    base = layout.export_dir(kind)
    held = _marker(base)
    if held is None or not held.get("version"):
        return None
    staging = base.with_name(f".{base.name}.migrating-{os.getpid()}")
    os.replace(base, staging)
    base.mkdir()
    target = layout.export_version(kind, held["version"])
    os.replace(staging, target)
    set_current(layout, kind, held["version"])
    return target


def set_current(layout: DataLayout, kind: str, version: str) -> Path:
    """Point ``export/<kind>/current`` at ``version`` (a relative link, replaced atomically: it survives
    moving the data root)."""
    link = layout.export_current(kind)
    tmp = link.with_name(f".current-{os.getpid()}")
    tmp.unlink(missing_ok=True)
    os.symlink(layout.export_version(kind, version).name, tmp)
    os.replace(tmp, link)
    return link


def export_revision(layout: DataLayout, kind: str, version: str | None, **options: Any) -> Revision:
    """Export ``version`` (default: the split's CURRENT) into ``export/<kind>/<version>/`` unless the same
    export is already there, then make it ``current``. ``options``: those of :func:`export_split`."""
    migrate_flat(layout, kind)
    version = SplitStore(layout, kind).resolve(version)
    directory = layout.export_version(kind, version)
    held = _marker(directory)
    wanted = {"kind": kind, "version": version, "protocol": PROTOCOL_VERSION, "prompt": options.get("prompt", "envsim")}
    unchanged = (
        held is not None
        and all(held.get(k) == v for k, v in wanted.items())
        and bool(held.get("envsimbench_format", False)) == bool(options.get("envsimbench_format", False))
        and (directory / "README.md").exists()
    )
    if unchanged:
        card = (directory / "README.md").read_text()
        files = sorted(str(p.relative_to(directory)) for p in directory.rglob("*") if p.is_file() and p.name != MARKER)
        rows = int(held.get("rows") or SplitStore(layout, kind).manifest(version).get("samples") or 0)
        report = ExportReport(directory, kind, version, split_kind(kind).hf_split, rows, files, card)
    else:
        report = export_split(layout, kind, version, directory, **options)
    current = set_current(layout, kind, version)
    layout.record_export(kind, current, version=version)  # readers take the recorded directory
    return Revision(report, unchanged, current)
