"""Where everything lives under the data root: ``DataLayout`` builds every path below it (code in Dagster takes
the ``store`` resource's ``layout()``), and records where each export went: an export may go anywhere, and every
reader takes the recorded directory (docs/extending.md "Readers follow the record").
"""

from __future__ import annotations

import fcntl
import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from pipeline.core.settings import Settings
from pipeline.store import tables


def default_data_root() -> Path:
    """``./data``, the default of ``Settings.data_root`` (the environment is not read here: an entry point
    passes the root of its ``Settings`` value, ``ENVSIM_DATA_ROOT`` included)."""
    return Settings().data_root


def resolve_root(data_root: str | Path) -> Path:
    """A data root as the run tags, the sensors and ``./forge sql`` compare it: absolute, ``~`` and links resolved."""
    return Path(data_root).expanduser().resolve()


#: free bytes a data root's filesystem needs before a run starts (its run history and first tables)
MIN_FREE_BYTES = 1 << 20


def root_problems(data_root: str | Path) -> list[str]:
    """What makes ``data_root`` (or its nearest existing folder) unusable before anything is written, one line each
    naming the path and the fix: a file, not writable, or under :data:`MIN_FREE_BYTES` free."""
    root = resolve_root(data_root)
    fix = "set ENVSIM_DATA_ROOT to a writable directory on a disk with free space"
    existing = next((p for p in (root, *root.parents) if p.exists()), Path("/"))
    if not existing.is_dir():
        where = "" if existing == root else f"cannot be made: {existing} "
        return [f"the data root {root} {where}is a file, not a directory: {fix}"]
    if not os.access(existing, os.W_OK | os.X_OK):
        where = "" if existing == root else f" (its nearest existing folder {existing})"
        return [f"the data root {root}{where} is not writable by this user or is on a read-only filesystem: {fix}"]
    stat = os.statvfs(existing)
    free = stat.f_bavail * stat.f_frsize
    if free < MIN_FREE_BYTES:
        return [
            f"the data root {root} has no space left: {free:,} bytes free on its filesystem, a run needs at least "
            f"{MIN_FREE_BYTES:,} to start: free space there or {fix}"
        ]
    return []


#: bytes a run of the default profile leaves under its data root, run history included (``du -sb data`` after
#: ``./forge run`` on a fresh root: 38 MB), rounded up: what a full disk is told it needs
DEFAULT_RUN_BYTES = 40_000_000

#: how a full disk shows in an error: the OS (ENOSPC), sqlite (Dagster's run history), DuckDB
_DISK_FULL = re.compile(r"No space left on device|\[Errno 28\]|database or disk is full|disk is full", re.IGNORECASE)
#: sqlite's answer when its journal cannot be written (a full disk among other causes: told apart by the free space)
_DISK_IO = re.compile(r"disk I/O error", re.IGNORECASE)
_QUOTED_PATH = re.compile(r"""['"](/[^'"]+)['"]""")


def disk_full(message: str, data_root: str | Path) -> str | None:
    """One line for an error ``message`` that says the disk is full: the path it names (else the data root), the
    bytes free on that filesystem and the bytes a default run needs there, and the fix; None for any other error."""
    if not _DISK_FULL.search(message) and not _DISK_IO.search(message):
        return None
    named = _QUOTED_PATH.search(message)
    path = Path(named.group(1)) if named else resolve_root(data_root)
    existing = next((p for p in (path, *path.parents) if p.exists()), Path("/"))
    stat = os.statvfs(existing)
    free, size = stat.f_bavail * stat.f_frsize, stat.f_blocks * stat.f_frsize
    if not _DISK_FULL.search(message) and free >= DEFAULT_RUN_BYTES:  # an I/O error on a disk with room: not this
        return None
    return (
        f"out of space writing {path}: {free:,} bytes free of {size:,} on its filesystem, a run of the default "
        f"profile needs about {DEFAULT_RUN_BYTES:,} bytes under the data root: free space there or set "
        "ENVSIM_DATA_ROOT to a disk with room, then run it again (what finished is kept)"
    )


#: a labeled-steps part of a partition: ``part-<partition>-<content key>.parquet`` (+ ``.issues.json``)
_PARTITION_PART = re.compile(r"^part-(?P<partition>.+)-(?P<key>[0-9a-f]{20})\.(parquet|issues\.json)$")


def step_part_partition(name: str) -> str | None:
    """The partition a file under ``steps/`` belongs to; None for an unpartitioned run's part."""
    m = _PARTITION_PART.match(name)
    return m.group("partition") if m else None


class UnsafeName(ValueError):
    """A name (simulator, split version, partition key, export, job, run id…) that cannot be a path component."""


#: a path component made of a name: letters, digits and ``_ . - + = @ ,`` — no separator, no leading
#: dot (so never ``.`` or ``..``), no control character, at most 128 characters
_SAFE_COMPONENT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+=@,-]{0,127}")


def safe_name(name: object, what: str = "name") -> str:
    """``name`` unchanged when it can be one path component under the data root, else ``UnsafeName`` saying which
    ``what`` was refused and why: every name from configuration or data that becomes part of a path comes here."""
    if isinstance(name, str) and _SAFE_COMPONENT.fullmatch(name):
        return name
    text = repr(name) if len(repr(name)) <= 80 else repr(name)[:80] + "…"
    if not isinstance(name, str):
        why = f"it is a {type(name).__name__}, not a string"
    elif not name:
        why = "it is empty"
    elif "/" in name or "\\" in name or name in (".", ".."):
        why = "it contains a path separator or is a relative path ('.', '..')"
    elif name.startswith("."):
        why = "it starts with a dot"
    elif len(name) > 128:
        why = f"it is {len(name)} characters long (at most 128)"
    else:
        bad = sorted({c for c in name if not re.fullmatch(r"[A-Za-z0-9_.+=@,-]", c)})
        why = f"it contains {''.join(bad)!r} (allowed: letters, digits and _ . - + = @ ,)"
    raise UnsafeName(f"{what} {text} cannot be used as a file or directory name: {why}")


@contextmanager
def file_lock(path: Path, *, wait: bool = True) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created, with its folder) until the block ends: the one lock
    of the data root's read-change-write steps. ``wait=False``: raise ``BlockingIOError`` if it is held."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as fh:  # closing the file releases the lock
        fcntl.flock(fh, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        yield


@dataclass(frozen=True)
class DataLayout:
    root: Path
    #: a partition-scoped view (``ENVSIM_SHARDS``): the collection files and step parts are the partition's
    partition: str | None = None

    @classmethod
    def at(cls, root: str | os.PathLike[str] | None = None) -> DataLayout:
        return cls(Path(root) if root else default_data_root())

    def for_partition(self, partition: str | None) -> DataLayout:
        return replace(self, partition=None if partition is None else safe_name(partition, "partition key"))

    def export_dir(self, name: str) -> Path:
        """``export/<name>/``: the default directory of an export (``benchmark``, ``rollouts-<filter>``…)."""
        return self.root / "export" / safe_name(name, "export name")

    def export_version(self, kind: str, version: str) -> Path:
        """``export/<kind>/<version>/``: the Hugging Face dataset of one split version (kept like a Hub revision)."""
        return self.export_dir(kind) / safe_name(version, "split version")

    def export_current(self, kind: str) -> Path:
        """``export/<kind>/current``: a relative link to the version exported last (what readers load)."""
        return self.export_dir(kind) / "current"

    @property
    def export_record(self) -> Path:
        """``exports.json``: where each export went last, as its writer recorded it."""
        return self.root / "exports.json"

    def record_export(self, name: str, directory: Path, **facts: str) -> None:
        """Record that export ``name`` is in ``directory`` (relative when under the data root, so the record survives
        moving it), with ``facts``, under an exclusive lock so exports finishing together each keep their record."""
        root = self.root.absolute()
        absolute = Path(directory).absolute()
        where = str(absolute.relative_to(root)) if absolute.is_relative_to(root) else str(absolute)
        key = safe_name(name, "export name")
        with file_lock(self.root / f".{self.export_record.name}.lock"):
            records = self._export_records()
            records[key] = {"directory": where, **facts}
            tmp = self.export_record.with_name(f".{self.export_record.name}.{os.getpid()}")
            tmp.write_text(json.dumps(records, indent=2, sort_keys=True) + "\n")
            os.replace(tmp, self.export_record)  # readers see the old record or the new one, never half of one

    def recorded_exports(self) -> dict[str, Path]:
        """Every recorded export: name -> its directory (a relative record resolved under this root)."""
        return {name: self.root / rec["directory"] for name, rec in sorted(self._export_records().items())}

    def recorded_export(self, name: str) -> Path | None:
        """The directory export ``name`` was last written to (None: never exported under this root)."""
        return self.recorded_exports().get(name)

    def _export_records(self) -> dict[str, dict[str, str]]:
        try:
            return json.loads(self.export_record.read_text())
        except FileNotFoundError:
            return {}

    @property
    def jobs(self) -> Path:
        """``jobs/``: GPU jobs' scripts, logs and Pipes files (the launcher's default working directory)."""
        return self.root / "jobs"

    @property
    def checkpoints(self) -> Path:
        """``checkpoints/``: SFT checkpoint versions (``ckpt-*`` + ``LATEST``)."""
        return self.root / "checkpoints"

    @property
    def rollouts(self) -> Path:
        """``rollouts/``: one directory per simulated-rollout run."""
        return self.root / "rollouts"

    def splits_dir(self, kind: str) -> Path:
        """``splits/<kind>/``: the versions of one kind of split (benchmark, SFT mixture, curriculum)."""
        return self.root / "splits" / safe_name(kind, "split kind")

    def agent_record(self, name: str) -> Path:
        """``agent/<name>.jsonl``: an agent collection's resumable record of finished tasks."""
        return self.root / "agent" / f"{safe_name(name, 'agent record name')}.jsonl"

    @property
    def determinism_dir(self) -> Path:
        """``determinism/``: environments excluded from the splits (re-execution and quarantine findings)."""
        return self.root / "determinism"

    def determinism_findings(self, kind: str) -> Path:
        """``determinism/<kind>-<partition or all>.parquet`` (kind: ``nondeterministic`` or ``quarantine``)."""
        return self.determinism_dir / f"{kind}-{self.partition or 'all'}.parquet"

    @property
    def quality_gate(self) -> Path:
        """``quality/gate.parquet``: the steps of the environments the quality gate leaves out (+ ``.json`` sidecar)."""
        return self.quality_dir / "gate.parquet"

    def eval_dir(self, version: str) -> Path:
        """``eval/<benchmark version>/``: one results file per simulator, the plot."""
        return self.root / "eval" / safe_name(version, "split version")

    def eval_results(self, version: str, simulator: str) -> Path:
        """``eval/<version>/<simulator>.jsonl``: a simulator's (``results_name``) per-sample results on a version."""
        return self.eval_dir(version) / f"{safe_name(simulator, 'simulator name')}.jsonl"

    @property
    def quality_dir(self) -> Path:
        """``quality/``: the corpus quality gate (environment report, simulator-judged yield, accepted corpus)."""
        return self.root / "quality"

    def verdict(self, check: str) -> Path:
        """``quality/<check>_verdict.json`` (a partition's ``<check>_verdict-<partition>.json``): a check's kept
        verdict (:func:`pipeline.store.verdicts.kept`)."""
        suffix = f"-{self.partition}" if self.partition is not None else ""
        return self.quality_dir / f"{check}_verdict{suffix}.json"

    def table(self, name: str, part: str | None = None) -> Path:
        """The file of table of record ``name`` (``part``: a multi-file table's part, e.g. a checker's)."""
        declared = tables.stored(tables.PARQUET)
        if name not in declared:
            raise KeyError(f"unknown table of record {name!r}; known: {sorted(declared)}")
        return declared[name].file(self.root, None if part is None else safe_name(part, f"{name} part"))

    @property
    def env_quality(self) -> Path:
        """``quality/env_quality.parquet``: one row per environment (the executor's report card and verdict)."""
        return self.table("env_quality")

    @property
    def env_tool_quality(self) -> Path:
        """``quality/env_tool_quality.parquet``: one row per (environment, tool)."""
        return self.table("env_tool_quality")

    def quality_probes(self, fingerprint: str) -> Path:
        """``quality/probes/<corpus fingerprint>.parquet``: the stratified probe samples the checkers score."""
        return self.quality_dir / "probes" / f"{safe_name(fingerprint, 'corpus fingerprint')}.parquet"

    def yield_results(self, fingerprint: str, checker: str) -> Path:
        """``quality/checks/<fingerprint>/<checker>.jsonl``: a checker's per-probe results (resumable)."""
        checks = self.quality_dir / "checks" / safe_name(fingerprint, "corpus fingerprint")
        return checks / f"{safe_name(checker, 'checker name')}.jsonl"

    def env_yield(self, checker: str) -> Path:
        """``quality/env_yield/<checker>.parquet``: a checker's per-environment verdicts (the ``env_yield`` view)."""
        return self.table("env_yield", safe_name(checker, "checker name"))

    @property
    def accepted_corpus(self) -> Path:
        """``quality/accepted/``: the environments that pass the gate and their scenarios, in EnvScaler's layout."""
        return self.quality_dir / "accepted"

    @property
    def environments(self) -> Path:
        return self.table("environments")

    @property
    def tool_code(self) -> Path:
        return self.root / "tool_code.parquet"

    @property
    def trajectories_dir(self) -> Path:
        return tables.TABLES.get("trajectories").file(self.root).parent

    @property
    def trajectories(self) -> Path:
        """The file a collection writes: ``trajectories.parquet``, or ``part-<partition>.parquet``."""
        return self._collection_file("trajectories", "part-")

    def trajectory_files(self) -> list[str]:
        """Every file of the trajectories table (a partition-scoped layout: only its own)."""
        return self._collection_files("trajectories", "part-")

    def _collection_file(self, whole: str, prefix: str) -> Path:
        """``trajectories/<whole>.parquet``, or ``<prefix><partition>.parquet`` in a partition-scoped layout."""
        name = f"{prefix}{self.partition}" if self.partition is not None else whole
        return self.trajectories_dir / f"{name}.parquet"

    def _collection_files(self, whole: str, prefix: str) -> list[str]:
        """The existing files of one collection table: the unpartitioned one, then every partition's (or its own)."""
        if self.partition is not None:
            own = self._collection_file(whole, prefix)
            return [str(own)] if own.exists() else []
        unpartitioned = self.trajectories_dir / f"{whole}.parquet"
        files = [unpartitioned] if unpartitioned.exists() else []
        return [str(p) for p in files + sorted(self.trajectories_dir.glob(f"{prefix}*.parquet"))]

    @property
    def collected_steps(self) -> Path:
        """Labels observed at collection: ``collected-steps[-<partition>].parquet`` (+ ``.json`` sidecar)."""
        return self._collection_file("collected-steps", "collected-steps-")

    @property
    def collection_issues(self) -> Path:
        """Rejected tasks of a collection: ``issues.parquet``, or ``issues-<partition>.parquet``."""
        return self._collection_file("issues", "issues-")

    def collection_issue_files(self) -> list[str]:
        """Every issues file (unpartitioned and per partition; a partition-scoped layout: its own)."""
        return self._collection_files("issues", "issues-")

    @property
    def steps_dir(self) -> Path:
        return tables.TABLES.get("steps").file(self.root).parent

    def step_part(self, key: str) -> Path:
        """A labeled-steps part named by its content key (and the partition, in a partition-scoped layout)."""
        return tables.TABLES.get("steps").file(
            self.root, f"{self.partition}-{key}" if self.partition is not None else key
        )

    def step_parts(self) -> list[str]:
        parts = sorted(self.root.glob(tables.TABLES.get("steps").files[0]))
        if self.partition is not None:
            parts = [p for p in parts if step_part_partition(p.name) == self.partition]
        return [str(p) for p in parts]

    def steps_glob(self) -> str:
        return str(self.step_part("*"))  # the content key has no '-': "part-bfcl-1-*" never matches bfcl-10

    @property
    def strata(self) -> Path:
        """``strata/strata.parquet``: one row per labeled step with its strata and exclusion reason."""
        return self.table("strata")

    @property
    def strata_manifest(self) -> Path:
        """``strata/manifest.json``: the step-table fingerprint the strata table was built from."""
        return self.root / "strata" / "manifest.json"

    @property
    def duckdb(self) -> Path:
        return self.root / "envsim.duckdb"
