"""Import the published EnvSimBench (``Louie-CookieApril/EnvSimBench`` on the Hugging Face Hub, or local
copies) — its benchmark file and its process data — into a split version of ours, marked imported.

Input: JSON lists, single JSON objects or JSON lines of reference samples (format in
:mod:`pipeline.envsimbench.export`): a benchmark sample has one ``step_detail``; a process-data record
may instead hold a ``trajectory`` list of steps (``config_before``, ``config_after``, ``action``,
``observation``, ``config_change``). For every step:

* states are canonicalised for hashing, Δ and storage (big ints become ``$int`` etc.), and **Δ is recomputed** from
  ``config_before`` / ``config_after``; a Δ whose size differs from the file's ``change_count`` is kept
  (our |Δ| governs the strata) and reported by id;
* outcome, |Δ| bucket, argument cardinality and the benchmark cell come from **our rules**
  (an observation starting with ``Error:`` is an error step, one that reports failure is a failure);
* model-facing text stays byte-faithful: each step's published ``config_before`` and arguments are kept
  as published (key order, non-ASCII text, nesting) in ``published.parquet`` next to the samples, so the
  ``envsimbench`` prompt of an imported sample equals the one the reference code builds from the file;
* ``code(a_t)`` is the tool's method cut out of ``env_code`` with ``ast``; the whole class is kept
  (``env_code.parquet`` next to the samples) for the ``envsimbench`` prompt template;
* a step that cannot be represented (no action name, arguments or configs that are not objects, a
  missing observation…) is reported with its id and reason, and the rest is imported.

The version id hashes the input files' contents: the same files give the same version, byte for byte.
"""

from __future__ import annotations

import ast
import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.core.axes import AXES
from pipeline.core.canonical import canonical_json, canonicalize, text_hash
from pipeline.core.delta import diff
from pipeline.core.outcome import ERROR, FAILURE, SUCCESS, reports_failure
from pipeline.core.protocol import parse_observation
from pipeline.core.strata import BENCHMARK_CELLS, Cell
from pipeline.envs import blobs
from pipeline.envsimbench.export import ENV_CODE_FILE, PUBLISHED_FILE
from pipeline.report.tables import Facts, Markdown, Table
from pipeline.store import glossary
from pipeline.store.layout import DataLayout
from pipeline.store.parquet_io import atomic_path
from pipeline.store.schema import SAMPLE, encode_delta
from pipeline.store.versions import BENCHMARK, SplitStore

SOURCE = glossary.IMPORTED_SOURCE  # "envsimbench"
PUBLISHED_SCHEMA = pa.schema(
    [
        pa.field("step_id", pa.string(), nullable=False),
        pa.field("state_before_json", pa.string()),
        pa.field("arguments_json", pa.string()),
    ]
)
HUB_REPO = "Louie-CookieApril/EnvSimBench"
LICENSE = "see the EnvSimBench dataset card (Louie-CookieApril/EnvSimBench)"


class NothingToImport(ValueError):
    """Nothing could be imported (no file, no readable sample)."""


@dataclass
class ImportReport:
    version: str
    samples: int
    files: list[str]
    strata: dict[str, int] = field(default_factory=dict)
    skipped: list[dict[str, str]] = field(default_factory=list)  # {id, reason}
    change_count_mismatches: list[dict[str, Any]] = field(default_factory=list)  # {id, delta_size, change_count}
    without_code: list[str] = field(default_factory=list)
    environments: int = 0


@dataclass(frozen=True)
class _Step:
    origin: str  # file:record[:step] — how a problem names the record
    info: dict[str, Any]
    env_code: Any
    detail: Any
    step: Any


def _records(path: Path) -> Iterator[tuple[int, Any]]:
    text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    yield number, json.loads(line)
                except json.JSONDecodeError as exc:
                    yield number, ValueError(f"line {number} is not JSON: {exc.msg}")
        return
    yield from enumerate(data) if isinstance(data, list) else [(0, data)]


def iter_steps(paths: Iterable[Path]) -> Iterator[_Step | tuple[str, str]]:
    """Every step of the files: a :class:`_Step`, or ``(origin, reason)`` for a record that is not a sample."""
    for path in paths:
        for index, record in _records(Path(path)):
            origin = f"{Path(path).name}:{index}"
            if isinstance(record, Exception):
                yield origin, str(record)
                continue
            if not isinstance(record, dict):
                yield origin, f"a record must be an object, not {type(record).__name__}"
                continue
            info = record.get("task_info") if isinstance(record.get("task_info"), dict) else {}
            env_code = record.get("env_code") or record.get("env") or record.get("environment")
            if isinstance(record.get("step_detail"), dict):
                yield _Step(origin, info, env_code, record["step_detail"], info.get("step"))
            elif isinstance(record.get("trajectory"), list):
                for k, item in enumerate(record["trajectory"]):
                    if isinstance(item, dict):
                        yield _Step(f"{origin}:{k}", info, env_code, item, item.get("step", k))
                    else:
                        yield f"{origin}:{k}", "a trajectory step must be an object"
            else:
                yield origin, "neither step_detail nor trajectory"


def method_code(env_code: str, tool: str) -> str | None:
    """The source of method ``tool`` in ``env_code`` (the last class defining it wins), or None."""
    try:
        tree = ast.parse(env_code)
    except (SyntaxError, ValueError):
        return None
    found = None
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == tool:
                    found = item
    if found is None:
        return None
    start = min([found.lineno] + [d.lineno for d in found.decorator_list]) - 1
    body = env_code.splitlines()[start : found.end_lineno]
    indent = min((len(line) - len(line.lstrip()) for line in body if line.strip()), default=0)
    return "\n".join(line[indent:] for line in body)


def _arguments(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("```"):
            text = text.strip("`").removeprefix("json").strip()
        for parse in (json.loads, ast.literal_eval):
            try:
                value = parse(text)
                break
            except Exception:  # try the next reading
                continue
    if not isinstance(value, dict):
        raise ValueError(f"arguments must be an object, not {type(value).__name__}")
    return value


def _cell(row: dict[str, Any], cells: Iterable[Cell]) -> str:
    """The first cell the sample row qualifies for (by its axis values)."""
    fallback = "error" if row["outcome"] == ERROR else "unassigned"
    return next((cell.name for cell in cells if cell.matches(row)), fallback)


def _outcome(tool: str, content: str) -> str:
    if content.lstrip().startswith("Error:"):
        return ERROR
    return FAILURE if reports_failure(tool, parse_observation(content)) else SUCCESS


def _row(step: _Step, cells: tuple[Cell, ...]) -> tuple[dict[str, Any], str | None, int | None, dict[str, str]]:
    """A SAMPLE row (without position / ids), the whole class source, the file's change_count, and the
    published state and arguments as JSON texts in the file's own key order (for model-facing text)."""
    detail = step.detail
    action = detail.get("action")
    if not isinstance(action, dict) or not isinstance(action.get("name") or action.get("action"), str):
        raise ValueError("action has no tool name")
    tool = action.get("name") or action.get("action")
    arguments = _arguments(action.get("arguments", action.get("args")))
    before, after = detail.get("config_before"), detail.get("config_after")
    if not isinstance(before, dict) or not isinstance(after, dict):
        raise ValueError("config_before and config_after must be objects")
    observation = detail.get("observation")
    content = observation.get("content") if isinstance(observation, dict) else observation
    if content is None:
        raise ValueError("no observation content")
    raw = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
    state_before, state_after = canonicalize(before), canonicalize(after)
    before_json, after_json = canonical_json(state_before), canonical_json(state_after)
    delta = diff(state_before, state_after)
    arguments_json = canonical_json(canonicalize(arguments))
    env_code = step.env_code if isinstance(step.env_code, str) and step.env_code.strip() else None
    code = method_code(env_code, tool) if env_code else None
    before_hash = text_hash(before_json)
    change = detail.get("config_change") if isinstance(detail.get("config_change"), dict) else {}
    count = change.get("change_count")
    row = {
        "tool": tool,
        "arguments_json": arguments_json,
        "args_count": len(arguments),
        "code": code,
        "code_ref": blobs.ref_of(code) if code else None,
        "state_before_json": before_json,
        "state_after_json": after_json,
        "raw_observation": raw,
        "observation_json": canonical_json(canonicalize(parse_observation(raw))),
        "outcome": _outcome(tool, raw),
        "delta": encode_delta(delta),
        "delta_size": len(delta),
        "state_before_hash": before_hash,
        "state_after_hash": text_hash(after_json),
        "sample_hash": hashlib.md5(f"{before_hash}|{tool}|{arguments_json}".encode()).hexdigest(),
    }
    row.update(AXES.labels_of(row))  # delta_bucket, args_cardinality: every axis' label
    row["stratum"] = _cell(row, cells)
    published = {
        "state_before_json": json.dumps(before, ensure_ascii=False),  # key order as published
        "arguments_json": json.dumps(arguments, ensure_ascii=False),
    }
    return row, env_code, count if isinstance(count, int) and not isinstance(count, bool) else None, published


def import_envsimbench(
    layout: DataLayout,
    files: list[str | Path],
    name: str = "benchmark",
    make_current: bool = False,
    cells: Iterable[Cell] = BENCHMARK_CELLS,
) -> ImportReport:
    """Import reference-format files (benchmark or process data) as one benchmark split version."""
    paths = sorted({Path(f) for f in files}, key=str)
    if (missing := [str(p) for p in paths if not p.is_file()]) or not paths:
        raise NothingToImport(f"envsimbench import: no such file(s): {missing or 'none given'}")
    cells = tuple(cells)
    digest = hashlib.blake2b(digest_size=6)
    for path in paths:
        digest.update(path.name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    digest.update(json.dumps([c.to_dict() for c in cells], sort_keys=True).encode())
    version = f"bench-{SOURCE}-{name}-{digest.hexdigest()}"
    report = ImportReport(version, 0, [str(p) for p in paths])
    rows: list[dict[str, Any]] = []
    published_rows: list[dict[str, str]] = []
    codes: dict[str, str] = {}
    seen: Counter[str] = Counter()
    for step in iter_steps(paths):
        if isinstance(step, tuple):
            report.skipped.append({"id": step[0], "reason": step[1]})
            continue
        task_id = str(step.info.get("task_id") or step.origin)
        index = step.step if isinstance(step.step, int) and not isinstance(step.step, bool) else 0
        step_id = f"{SOURCE}/{task_id}/{index}"
        seen[step_id] += 1
        if seen[step_id] > 1:
            step_id = f"{step_id}~{seen[step_id] - 1}"
        try:
            row, env_code, count, published = _row(step, cells)
        except (ValueError, TypeError, RecursionError) as exc:
            report.skipped.append({"id": f"{step_id} ({step.origin})", "reason": str(exc)})
            continue
        env_id = f"{SOURCE}/{step.info.get('env_id') or 'unknown'}"
        row.update(
            {
                "position": len(rows),
                "step_id": step_id,
                "trajectory_id": f"{SOURCE}/{task_id}",
                "task_id": task_id,
                "env_id": env_id,
                "source": SOURCE,
                "step_index": index,
            }
        )
        if count is not None and count != row["delta_size"]:
            report.change_count_mismatches.append(
                {"id": step_id, "delta_size": row["delta_size"], "change_count": count}
            )
        if row["code"] is None:
            report.without_code.append(step_id)
        if env_code:
            codes.setdefault(env_id, env_code)
        rows.append(row)
        published_rows.append({"step_id": step_id, **published})
    if not rows:
        raise NothingToImport(
            f"envsimbench import: no sample could be read from {report.files}: "
            + "; ".join(f"{s['id']}: {s['reason']}" for s in report.skipped[:5])
        )
    store = SplitStore(layout, BENCHMARK)
    directory = store.dir(version)
    directory.mkdir(parents=True, exist_ok=True)
    with atomic_path(store.samples(version)) as tmp:
        pq.write_table(pa.Table.from_pylist(rows, schema=SAMPLE), tmp, compression="zstd")
    with atomic_path(directory / ENV_CODE_FILE) as tmp:
        pq.write_table(
            pa.table({"env_id": sorted(codes), "env_code": [codes[e] for e in sorted(codes)]}), tmp, compression="zstd"
        )
    with atomic_path(directory / PUBLISHED_FILE) as tmp:
        pq.write_table(pa.Table.from_pylist(published_rows, schema=PUBLISHED_SCHEMA), tmp, compression="zstd")
    (directory / "sample_ids.txt").write_text("".join(f"{r['step_id']}\n" for r in rows))
    counts = Counter(r["stratum"] for r in rows)
    order = [c.name for c in cells] + sorted(set(counts) - {c.name for c in cells})
    table = [
        {
            "stratum": s,
            "requested": counts[s],
            "available": counts[s],
            "selected": counts[s],
            "environments": len({r["env_id"] for r in rows if r["stratum"] == s}),
            "missing": 0,
        }
        for s in order
        if counts[s]
    ]
    store.write_manifest(
        version,
        {
            "version": version,
            "kind": BENCHMARK,
            "imported": {
                "source": SOURCE,
                "name": name,
                "files": [p.name for p in paths],
                "skipped": report.skipped,
                "change_count_mismatches": report.change_count_mismatches,
                "without_code": len(report.without_code),
            },
            "samples": len(rows),
            "spec": {
                "seed": 0,
                "input": digest.hexdigest(),
                "imported": SOURCE,
                "name": name,
                "composition": [c.to_dict() for c in cells],
            },
            "strata": table,
            "shortfalls": [],
        },
    )
    store.created(version)
    if make_current:
        store.set_current(version)
    report.samples, report.strata, report.environments = len(rows), dict(counts), len({r["env_id"] for r in rows})
    return report


def import_facts(reports: list[ImportReport]) -> Facts:
    """What an import reports (``envsimbench_import``'s metadata): each version imported with its counts, the
    samples skipped (by id, with the reason) and the strata; with nothing imported, what to configure."""
    if not reports:  # "Materialize all" on the default configuration: nothing to import, and it says so
        message = (
            "nothing imported: configure benchmark_files / process_files (local reference-format files) "
            f"or repo_id (e.g. {HUB_REPO}) in this asset's config"
        )
        return Facts({"versions": Markdown(f"_{message}_")}, [f"envsimbench_import: {message}"])
    rows = [
        {
            "version": r.version,
            "samples": r.samples,
            "environments": r.environments,
            "skipped": len(r.skipped),
            "change_count_mismatches": len(r.change_count_mismatches),
            "without_code": len(r.without_code),
        }
        for r in reports
    ]
    return Facts(
        {
            "versions": Table(rows, list(rows[0])),
            "skipped": Table(
                [{"version": r.version, **s} for r in reports for s in r.skipped], ["version", "id", "reason"]
            ),
            "strata": {r.version: r.strata for r in reports},
        }
    )


def download(
    repo_id: str = HUB_REPO,
    patterns: Iterable[str] = ("Benchmark/*",),
    revision: str | None = None,
    token: str | None = None,
    endpoint: str | None = None,
    cache_dir: str | Path | None = None,
) -> list[Path]:
    """The files of a Hub dataset repo matching ``patterns`` (``huggingface_hub.snapshot_download``)."""
    from huggingface_hub import snapshot_download

    root = Path(
        snapshot_download(
            repo_id,
            repo_type="dataset",
            revision=revision,
            allow_patterns=list(patterns),
            token=token,
            endpoint=endpoint,
            cache_dir=cache_dir,
        )
    )
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in (".json", ".jsonl"))
    if not files:
        raise NothingToImport(f"no .json / .jsonl file in {repo_id} matches {list(patterns)}")
    return files
