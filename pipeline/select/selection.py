"""Benchmark split and Balance2 SFT mixture, versioned and deterministic.

Both pick per stratum with :func:`pick_diverse` (least-used environment first, seeded rank,
one sample per (s_t, a_t) hash), report every shortfall, materialise full samples and record a
manifest; the version id is derived from (seed, input fingerprint, spec), so the same input and
seed give the same version and byte-identical sample lists.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable

import duckdb

from pipeline.select.greedy import pick_diverse
from pipeline.select.samples import materialize_samples
from pipeline.select.stratify import current_fingerprint, strata_path
from pipeline.select.versions import BENCHMARK, MIXTURE, EmptySelection, SplitStore, version_id
from pipeline.store.duck import connect
from pipeline.store.layout import DataLayout
from pipeline.strata import BALANCE2_GROUPS, BENCHMARK_CELLS, Cell

DECONTAMINATION_KEYS = ("task_id", "env_id")


class ShortfallError(ValueError):
    """A stratum could not be filled and the configuration says that is fatal."""


@dataclass
class SelectionResult:
    kind: str
    version: str
    spec: dict[str, Any]
    strata: list[dict[str, Any]]  # per stratum: requested, available, selected, environments, missing
    samples: int
    path: str
    shortfalls: list[dict[str, Any]] = field(default_factory=list)

    def shortfall_message(self) -> str:
        return "; ".join(f"{s['stratum']}: {s['selected']} of {s['requested']} ({s['missing']} missing, "
                         f"{s['available']} candidates)" for s in self.shortfalls)


def _strata_rel(layout: DataLayout) -> str:
    path = strata_path(layout)
    if not path.exists():
        raise FileNotFoundError(f"no strata table at {path}; materialize 'step_strata' first")
    return f"read_parquet('{path}')"


def _select(
    con: duckdb.DuckDBPyConnection,
    layout: DataLayout,
    strata: list[tuple[str, str, int]],  # (name, SQL predicate, quota)
    seed: int,
    exclude_sql: str = "",
) -> tuple[list[tuple[str, str]], list[dict[str, Any]]]:
    """Picks ``(step_id, stratum)`` in pick order, and the per-stratum table.

    The usable strata rows (small: no states) are scanned once into an in-memory pool with their
    seeded rank; every stratum is then a query over that pool."""
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE pool AS
            SELECT step_id, env_id, sample_hash, outcome, delta_size, args_count, balance2_group,
                   md5(CAST(? AS VARCHAR) || ':' || step_id) AS rank
            FROM {_strata_rel(layout)} WHERE NOT excluded {exclude_sql}""",
        [seed],
    )
    usage: Counter[str] = Counter()
    taken: set[str] = set()
    picks: list[tuple[str, str]] = []
    table = []
    for name, predicate, quota in strata:
        available, envs = con.execute(
            f"SELECT count(DISTINCT sample_hash), count(DISTINCT env_id) FROM pool WHERE {predicate}").fetchone()
        chosen = _pick_cell(con, predicate, quota, envs, usage, taken)
        picks += [(step_id, name) for step_id, _ in chosen]
        table.append({"stratum": name, "requested": quota, "available": int(available), "selected": len(chosen),
                      "environments": len({e for _, e in chosen}), "missing": quota - len(chosen)})
    con.execute("DROP TABLE pool")
    return picks, table


def _pick_cell(con: duckdb.DuckDBPyConnection, predicate: str, quota: int, envs: int,
               usage: Counter[str], taken: set[str]) -> list[tuple[str, str]]:
    """:func:`pick_diverse` over the best-ranked candidates of every environment. Only the first
    ``per_env`` of each environment are fetched; if picking exhausts an environment that had more,
    the cell is picked again with a larger window, so the result equals picking from all candidates."""
    per_env = 2 * (quota // max(envs, 1)) + 16
    while True:
        candidates = con.execute(
            f"""SELECT env_id, rank, step_id, sample_hash, count(*) OVER (PARTITION BY env_id) AS env_total
                FROM pool WHERE {predicate}
                QUALIFY row_number() OVER (PARTITION BY env_id ORDER BY rank) <= ?""",
            [per_env],
        ).fetchall()
        trial_usage, trial_taken = Counter(usage), set(taken)
        exhausted: set[str] = set()
        chosen = pick_diverse([c[:4] for c in candidates], quota, trial_usage, trial_taken, exhausted)
        truncated = {c[0] for c in candidates if c[4] > per_env}
        if not (exhausted & truncated):
            usage.clear()
            usage.update(trial_usage)
            taken.clear()
            taken.update(trial_taken)
            return chosen
        per_env *= 4


def _finish(kind: str, layout: DataLayout, version: str, spec: dict[str, Any], picks: list[tuple[str, str]],
            table: list[dict[str, Any]], on_shortfall: str, make_current: bool, why_empty: str = "") -> SelectionResult:
    shortfalls = [t for t in table if t["missing"] > 0]
    result = SelectionResult(kind, version, spec, table, len(picks), "", shortfalls)
    if shortfalls and on_shortfall == "fail":
        raise ShortfallError(f"{kind} {version} cannot be filled: {result.shortfall_message()}")
    if not picks:  # never a usable version, whatever on_shortfall says
        asked = ", ".join(f"{t['stratum']} {t['requested']} ({t['available']} candidates)" for t in table) or "no stratum"
        raise EmptySelection(f"{kind} {version} selects no sample: {why_empty or 'no usable step matches any stratum'}; "
                             f"asked for {asked}")
    store = SplitStore(layout, kind)
    out = store.samples(version)
    out.parent.mkdir(parents=True, exist_ok=True)
    materialize_samples(layout, picks, strata_path(layout), out)
    (store.dir(version) / "sample_ids.txt").write_text("".join(f"{step_id}\n" for step_id, _ in picks))
    store.write_manifest(version, {"version": version, "kind": kind, "spec": spec, "strata": table,
                                   "samples": len(picks), "shortfalls": shortfalls})
    if make_current:
        store.set_current(version)
    result.path = str(out)
    return result


def build_benchmark(
    layout: DataLayout,
    composition: Iterable[Cell] = BENCHMARK_CELLS,
    seed: int = 0,
    on_shortfall: str = "fail",
    make_current: bool = True,
) -> SelectionResult:
    """The EnvSimBench composition (or a custom one), maximising distinct environments."""
    cells = list(composition)
    if len({c.name for c in cells}) != len(cells):
        raise ValueError("composition cell names must be unique")
    spec = {"seed": seed, "input": current_fingerprint(layout), "composition": [c.to_dict() for c in cells]}
    version = version_id(BENCHMARK, spec)
    with connect() as con:
        picks, table = _select(con, layout, [(c.name, c.sql(), c.quota) for c in cells], seed)
    return _finish(BENCHMARK, layout, version, spec, picks, table, on_shortfall, make_current)


def build_mixture(
    layout: DataLayout,
    sizes: dict[str, int] | None = None,
    seed: int = 0,
    decontaminate: str = "task_id",
    benchmark_version: str | None = None,
    on_shortfall: str = "warn",
    make_current: bool = True,
) -> SelectionResult:
    """Balance2: failure / no-change / simple / complex groups, decontaminated against a benchmark
    version by ``task_id`` or ``env_id`` and never sharing an (s_t, a_t) hash with it."""
    sizes = dict(BALANCE2_GROUPS if sizes is None else sizes)
    unknown = set(sizes) - set(BALANCE2_GROUPS)
    if unknown:
        raise ValueError(f"unknown Balance2 group(s) {sorted(unknown)}; known: {list(BALANCE2_GROUPS)}")
    if decontaminate not in DECONTAMINATION_KEYS:
        raise ValueError(f"decontaminate must be one of {DECONTAMINATION_KEYS}, not {decontaminate!r}")
    bench = SplitStore(layout, BENCHMARK)
    bench_version = bench.resolve(benchmark_version)
    bench_samples = str(bench.samples(bench_version))
    spec = {"seed": seed, "input": current_fingerprint(layout), "sizes": sizes, "decontaminate": decontaminate,
            "benchmark": bench_version}
    version = version_id(MIXTURE, spec)
    exclude = (f"AND {decontaminate} NOT IN (SELECT {decontaminate} FROM read_parquet('{bench_samples}')) "
               f"AND sample_hash NOT IN (SELECT sample_hash FROM read_parquet('{bench_samples}'))")
    strata = [(g, f"balance2_group = '{g}'", n) for g, n in sizes.items()]
    with connect() as con:
        picks, table = _select(con, layout, strata, seed, exclude)
        why = ""
        if not picks:
            before = con.execute(f"SELECT count(*) FROM {_strata_rel(layout)} WHERE NOT excluded").fetchone()[0]
            why = (f"decontamination against benchmark {bench_version} (by {decontaminate} and by (s_t, a_t) hash) "
                   f"leaves none of the {before} usable steps" if before else "there is no usable step (all excluded or none labeled)")
    return _finish(MIXTURE, layout, version, spec, picks, table, on_shortfall, make_current, why)
