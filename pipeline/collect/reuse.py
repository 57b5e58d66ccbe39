"""Collection that is a no-op when its inputs are unchanged (docs/environments.md).

Collection is deterministic, so a collection records an **input fingerprint** (:func:`fingerprint`: the
collector version, what labels depend on, the sandbox isolation, a digest of the code that produces trajectories,
the ``SourceConfig`` and the bytes of every file it names, the exploration settings and composition, the shard)
next to the file it writes (``trajectories/trajectories.collection.json``; a partition:
``part-<partition>.collection.json``), with the summary its asset reports and a digest of every file it wrote. A
later collection with the same fingerprint whose files are intact returns the recorded summary without opening an
environment (``CollectionResult.reused``); ``force: true`` collects anyway. An LLM agent is never reused (a model
endpoint answers differently from one run to the next). Labeled-steps parts are reused the same way, by a content
key (:mod:`pipeline.labeling.steps`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from pipeline.collect.collector import CollectReport
from pipeline.collect.explore import Coverage, ExploreSettings, ToolShown
from pipeline.collect.result import CollectionResult, ShardSummary
from pipeline.collect.sources import SourceConfig, configured_files
from pipeline.core.issues import TaskIssue
from pipeline.core.progress import Log
from pipeline.core.strata import Composition
from pipeline.execution.sandbox import Sandbox
from pipeline.labeling.rows import label_config
from pipeline.labeling.rows import sidecar as steps_sidecar
from pipeline.store import verdicts
from pipeline.store.layout import DataLayout
from pipeline.store.parquet_io import atomic_path
from pipeline.store.partitions import Shard

#: bump when collection writes different trajectories from the same inputs in a way the code digest misses
COLLECTOR_VERSION = "1"

_CODE_PACKAGES = ("collect", "core", "envs", "execution", "labeling", "models", "store")
#: the attributes of a :class:`Coverage` recorded as they are
_COVERAGE_VALUES = ("call_budget", "stop_reason", "last_new", "verdicts", "budget_text", "budget_setting")


def record_path(layout: DataLayout) -> Path:
    """``trajectories/<trajectories file stem>.collection.json``."""
    return layout.trajectories.with_name(layout.trajectories.stem + ".collection.json")


def _file_digest(path: Path) -> str:
    try:
        return verdicts.file_digest(path)
    except OSError as exc:
        return f"unreadable: {type(exc).__name__}"


def _plain(value: Any, root: tuple[str, ...] = ()) -> Any:
    """A JSON value of a configuration (dataclasses, paths, mappings, sets); a path under the data root ``root`` is
    written relative to it (``$ROOT/…``; ``root``: its spellings), so a moved root, or another root of the same
    inputs, fingerprints alike."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name), root) for f in dataclasses.fields(value)}
    if isinstance(value, Path):
        value = str(value)
    if isinstance(value, str):
        under = next((r for r in root if value == r or value.startswith(r + "/")), None)
        return value if under is None else "$ROOT" + value[len(under) :]
    if isinstance(value, dict) or hasattr(value, "items"):
        return {str(k): _plain(v, root) for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        return sorted(_plain(v, root) for v in value)
    if isinstance(value, (list, tuple)):
        return [_plain(v, root) for v in value]
    if value is None or isinstance(value, (int, float, bool)):
        return value
    return repr(value)


def fingerprint(
    cfg: SourceConfig,
    sandbox: Sandbox,
    explore_settings: ExploreSettings | None,
    composition: Composition | None,
    shard: Shard | None,
    agent: object | None,
    root: Path | None = None,
) -> str | None:
    """The input fingerprint of a collection; None when it must always run (an LLM agent). Paths under the data
    root ``root`` count relative to it."""
    if agent is not None:
        return None
    under = (str(root), str(root.resolve())) if root is not None else ()
    doc = {
        "collector": COLLECTOR_VERSION,
        "labels": label_config(sandbox.limits),
        "isolation": getattr(sandbox, "isolation", None),
        "code": verdicts.code_digest(_CODE_PACKAGES),  # the packages that produce trajectories
        "sources": _plain(cfg, under),
        "files": {_plain(Path(p), under): _file_digest(Path(p)) for _, p in configured_files(cfg)},
        "explore": _plain(explore_settings),
        "composition": _plain(composition or Composition()) if explore_settings is not None else None,
        "shard": _plain(shard),
    }
    return hashlib.blake2b(json.dumps(doc, sort_keys=True).encode(), digest_size=16).hexdigest()


def _outputs(layout: DataLayout) -> list[Path]:
    """The files a collection writes (the agent record aside: an agent is never reused)."""
    return [
        layout.trajectories,
        layout.collection_issues,
        layout.collected_steps,
        steps_sidecar(layout.collected_steps),
    ]


def _rows(path: Path) -> int | None:
    return pq.ParquetFile(str(path)).metadata.num_rows if path.suffix == ".parquet" else None


def record(layout: DataLayout, key: str | None, result: CollectionResult) -> None:
    """Write the record of a finished collection (none for an unfingerprinted one)."""
    path = record_path(layout)
    if key is None:
        path.unlink(missing_ok=True)
        return
    report, cov, shard = result.report, result.coverage, result.shard
    doc = {
        "fingerprint": key,
        "files": {
            p.name: {"bytes": p.stat().st_size, "digest": _file_digest(p), "rows": _rows(p)} for p in _outputs(layout)
        },
        "report": {**vars(report), "issues": [dataclasses.asdict(i) for i in report.issues]},  # counters as objects
        "coverage": None
        if cov is None
        else {
            "settings": dataclasses.asdict(cov.settings),
            "cells": dict(cov.cells),
            "cell_envs": {k: sorted(v) for k, v in cov.cell_envs.items()},
            "groups": dict(cov.groups),
            "steps": cov.steps,
            "tool_hits": [[env, tool, dict(hits)] for (env, tool), hits in cov.tool_hits.items()],
            "shown": [[env, tool, shown.to_dict()] for (env, tool), shown in cov.shown.items()],
            "tools": {env: list(tools) for env, tools in cov.tools.items()},
            **{name: getattr(cov, name) for name in _COVERAGE_VALUES},
        },
        "shard": None if shard is None else {k: v for k, v in _plain(shard).items() if k != "shard"},  # sets sorted
        "without_scenarios": list(result.without_scenarios),
        "explored_without": list(result.explored_without),
    }
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(doc, indent=1))


def _intact(layout: DataLayout, files: dict[str, Any]) -> str:
    """Why the recorded files are not exactly those on disk (empty: they are)."""
    for path in _outputs(layout):
        want = files.get(path.name)
        if want is None or not path.exists():
            return f"{path.name} is missing"
        if path.stat().st_size != want["bytes"] or _file_digest(path) != want["digest"]:
            return f"{path.name} changed since it was collected"
    return ""


def reused(
    layout: DataLayout,
    key: str | None,
    shard: Shard | None,
    composition: Composition | None,
    log: Log = lambda _m: None,
) -> CollectionResult | None:
    """The recorded result when ``layout``'s collection was made from the inputs ``key`` and its
    files are intact; otherwise None (and the stale record is removed: the collection runs)."""
    path = record_path(layout)
    where = f" partition {shard.key}" if shard is not None else ""
    if key is None:
        log(f"collecting{where} anew: an LLM agent is configured (a model endpoint is not deterministic)")
        return None
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    why = "the inputs changed" if doc.get("fingerprint") != key else _intact(layout, doc.get("files", {}))
    if why:
        log(f"collecting{where} anew: {why}")
        path.unlink(missing_ok=True)
        return None
    r = doc["report"]
    counters = {k: Counter(r[k]) for k in ("by_category", "by_env", "by_strategy")}
    report = CollectReport(r["trajectories"], r["actions"], [TaskIssue(**i) for i in r["issues"]], **counters)
    coverage = None
    if (c := doc["coverage"]) is not None:
        coverage = Coverage(ExploreSettings(**c["settings"]), composition or Composition())
        coverage.cells.update(c["cells"])
        for cell, envs in c["cell_envs"].items():
            coverage.cell_envs[cell].update(envs)
        coverage.groups.update(c["groups"])
        coverage.steps = c["steps"]
        coverage.tool_hits = defaultdict(Counter, {(env, tool): Counter(h) for env, tool, h in c["tool_hits"]})
        coverage.shown = defaultdict(ToolShown, {(env, tool): ToolShown.of(s) for env, tool, s in c["shown"]})
        coverage.explore_envs(c["tools"])
        for name in _COVERAGE_VALUES:  # a record always holds them: an older collector's fingerprint differs
            setattr(coverage, name, c[name])
    summary = None
    if shard is not None and (s := doc["shard"]) is not None:
        summary = ShardSummary(shard, set(s["source_envs"]), set(s["shard_envs"]), s["note"])
    log(
        f"trajectories{where} unchanged (input fingerprint {key[:12]}): reused {report.trajectories} trajectories "
        f"and {len(report.issues)} rejected tasks from {layout.trajectories.name}, nothing collected (force: true "
        "collects anyway)"
    )
    without, explored = doc["without_scenarios"], doc["explored_without"]  # an older record's fingerprint differs
    return CollectionResult(report, coverage, [], summary, without, explored, reused=True)
