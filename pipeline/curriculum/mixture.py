"""The α-curriculum SFT mixture (GenEnv): train where the simulator is at its frontier (docs/evaluation.md,
``curriculum_mixture``).

From one simulator's evaluation results (DuckDB ``eval_results``) the success rate is estimated per group of a
hierarchy of levels (stratum → |Δ| → environment), Beta-smoothed toward the parent level:
``p̂ = (successes + m · p̂_parent) / (n + m)``. Each group's weight is a curve of p̂ (:func:`genenv_weight`,
GenEnv's ``exp(−β · (p̂ − α)²)``, the default; :func:`flat_top_weight`), 0 where the difficulty filter ``k`` or a
stratum without evaluation rules it out; the mixture size is split over the groups in proportion to the weights
(capped by what each group has; largest remainders). Picking, decontamination and versioning are the Balance2
mixture's (:mod:`pipeline.select.selection`); the version spec holds the curve, its settings and the estimates.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Literal

import duckdb

from pipeline.core.axes import AXES
from pipeline.core.fields import setting
from pipeline.core.strata import BENCHMARK_GROUP_SQL, BEYOND_SQL
from pipeline.report.tables import Facts, Table
from pipeline.select.selection import (
    DEFAULT_DECONTAMINATION,
    PICKING_RULE,
    SelectionResult,
    decontamination,
    select_strata,
    write_version,
)
from pipeline.select.stratify import current_fingerprint
from pipeline.store import warehouse
from pipeline.store.duck import connect
from pipeline.store.layout import DataLayout
from pipeline.store.versions import BENCHMARK, CURRICULUM, SplitStore, version_id

#: the group hierarchy's levels: the benchmark group, the |Δ| axis' value, the environment
LEVELS = {"stratum": f"({BENCHMARK_GROUP_SQL})", "delta": AXES["delta"].column, "env": "env_id"}
CURVES = ("genenv", "flat_top")
METRICS = {
    "cm": "cm",
    "fm": "fm",
    "cm_changed_paths": "cm_changed_paths",
    "cm_reference": "cm_reference",
    "fm_and_cm": "(fm AND cm)",
}


@dataclass(frozen=True)
class CurriculumSpec:
    """What a curriculum mixture is built from (part of its version id); settings are checked on construction."""

    run_id: str  # the evaluation run (``<simulator>@<benchmark version>``)
    size: int = setting(1000, "Samples in the mixture.")
    curve: Literal["genenv", "flat_top"] = setting(
        "genenv",
        "Weight curve: 'genenv' (GenEnv's exp(−β(p̂ − α)²)) or "
        "'flat_top' (1 within ±band of alpha, Gaussian fall-off outside).",
    )
    alpha: float = setting(0.5, "Target success rate α in [0, 1] (GenEnv's zone of proximal development).")
    beta: float = setting(2.0, "genenv curve: sharpness β > 0 of exp(−β(p̂ − α)²) (GenEnv's released config: 2.0).")
    filter_k: float | None = setting(
        None,
        "GenEnv's difficulty filter k ≥ 0: a group with |p̂ − α| > k gets weight 0 (either curve; None: no filter).",
    )
    band: float = setting(
        0.1, "flat_top curve only: full weight within ±band of alpha, Gaussian fall-off (scale band) outside."
    )
    levels: tuple[str, ...] = setting(
        ("stratum", "delta"),
        "Group hierarchy from stratum, then delta (|Δ|) and/or env; estimates are smoothed toward the parent level.",
    )
    metric: Literal["cm", "fm", "cm_changed_paths", "cm_reference", "fm_and_cm"] = setting("cm", "Success metric.")
    prior_strength: float = setting(4.0, "Pseudo-samples of the parent estimate in each group's estimate.")
    decontaminate: str = setting(
        DEFAULT_DECONTAMINATION,
        "Decontamination rule against the benchmark: trajectory (no step of a benchmark "
        "trajectory, no benchmark (env, s_t, a_t)), task_id (same task/scenario), env_id (same environment), "
        "or a plugin's rule (pipeline.core.decontamination.DECONTAMINATION).",
    )
    benchmark_version: str | None = setting(None, "Decontaminate against this version (default: the one evaluated).")
    seed: int = setting(0, "Seed of the draw.")

    def __post_init__(self) -> None:
        """Reject settings the curve cannot use, one line each (NaN fails every range check)."""
        if self.curve not in CURVES:
            raise ValueError(f"curriculum curve must be one of {list(CURVES)}, not {self.curve!r}")
        if not 0 <= self.alpha <= 1:
            raise ValueError(f"curriculum alpha must be in [0, 1], got {self.alpha!r}")
        if not (self.beta > 0 and math.isfinite(self.beta)):
            raise ValueError(f"curriculum beta must be a finite number > 0, got {self.beta!r}")
        if self.filter_k is not None and not (self.filter_k >= 0):
            raise ValueError(f"curriculum filter_k must be ≥ 0 (or None for no filter), got {self.filter_k!r}")
        if self.curve == "flat_top" and not (self.band > 0 and math.isfinite(self.band)):
            raise ValueError(f"curriculum band must be a finite number > 0 with curve 'flat_top', got {self.band!r}")


class NoEvaluation(ValueError):
    """There are no evaluation results to build a curriculum from."""


def genenv_weight(p: float, alpha: float = 0.5, beta: float = 2.0) -> float:
    """GenEnv's environment reward R_env(p̂) = exp(−β · (p̂ − α)²): 1 at α, exp(−β/4) at p̂ = 0 or 1 with α = 0.5."""
    return math.exp(-beta * (p - alpha) ** 2)


def flat_top_weight(p: float, alpha: float, band: float) -> float:
    """The ``flat_top`` curve: 1 inside ±band around α, a Gaussian fall-off (scale = band) outside it."""
    return math.exp(-0.5 * (max(abs(p - alpha) - band, 0.0) / band) ** 2)


def weight(p: float, spec: CurriculumSpec) -> tuple[float, str | None]:
    """A group's weight at estimate ``p`` under ``spec``'s curve, and why the difficulty filter dropped it
    (weight 0 and the reason when |p − α| > ``filter_k``; None when kept)."""
    gap = abs(p - spec.alpha)
    if spec.filter_k is not None and gap > spec.filter_k:
        return 0.0, f"|p̂ − α| = {gap:.4f} > k = {spec.filter_k:g}"
    if spec.curve == "genenv":
        return genenv_weight(p, spec.alpha, spec.beta), None
    return flat_top_weight(p, spec.alpha, spec.band), None


def describe(spec: CurriculumSpec) -> str:
    """The weighting ``spec`` applies, as one line (asset metadata)."""
    if spec.curve == "genenv":
        text = f"genenv: w = exp(−{spec.beta:g}·(p̂ − {spec.alpha:g})²)"
    else:
        text = f"flat_top: w = 1 within {spec.alpha:g} ± {spec.band:g}, Gaussian fall-off (scale {spec.band:g}) outside"
    return text + (
        "" if spec.filter_k is None else f"; groups with |p̂ − {spec.alpha:g}| > {spec.filter_k:g} filtered out"
    )


def resolve_run(con: duckdb.DuckDBPyConnection, simulator: str | None, split_version: str | None) -> str:
    """The evaluation run to use: the named simulator's on ``split_version`` (default: its latest run)."""
    try:
        rows = con.execute(
            "SELECT run_id, simulator, split_version, max(seq) AS last FROM eval_results "
            "WHERE request_error IS NULL GROUP BY ALL ORDER BY last DESC"
        ).fetchall()
    except duckdb.CatalogException:
        raise NoEvaluation(
            "no evaluation results in DuckDB (table eval_results); materialize 'simulator_eval' first"
        ) from None
    candidates = [
        r for r in rows if (simulator is None or r[1] == simulator) and (split_version is None or r[2] == split_version)
    ]
    if not candidates:
        known = ", ".join(sorted({r[0] for r in rows})) or "none"
        raise NoEvaluation(
            f"no evaluation run of simulator {simulator!r} (split "
            f"version {split_version or 'any'}); known runs: {known}"
        )
    return candidates[0][0]


def estimates(con: duckdb.DuckDBPyConnection, spec: CurriculumSpec) -> dict[tuple[str, ...], tuple[float, int, int]]:
    """Smoothed success per group key at every level prefix: key -> (estimate, samples, successes)."""
    unknown = set(spec.levels) - set(LEVELS)
    if unknown or not spec.levels or spec.levels[0] != "stratum":
        raise ValueError(f"levels must start with 'stratum' and use only {list(LEVELS)}, got {list(spec.levels)}")
    if spec.metric not in METRICS:
        raise ValueError(f"metric must be one of {list(METRICS)}, not {spec.metric!r}")
    keys = ", ".join(f"CAST({LEVELS[lv]} AS VARCHAR) AS {lv}" for lv in spec.levels)
    rows = con.execute(
        f"SELECT {keys}, count(*) AS n, sum(({METRICS[spec.metric]})::INT) AS ok FROM eval_results "
        f"WHERE run_id = ? AND request_error IS NULL GROUP BY ALL",
        [spec.run_id],
    ).fetchall()
    if not rows:
        raise NoEvaluation(f"evaluation run {spec.run_id!r} has no scored samples")
    depth = len(spec.levels)
    counts: dict[tuple[str, ...], list[int]] = {}
    for row in rows:
        n, ok = int(row[depth]), int(row[depth + 1] or 0)
        for d in range(depth + 1):
            c = counts.setdefault(tuple(row[:d]), [0, 0])
            c[0] += n
            c[1] += ok
    m = spec.prior_strength
    out: dict[tuple[str, ...], tuple[float, int, int]] = {}
    for key in sorted(counts, key=lambda k: (len(k), k)):
        n, ok = counts[key]
        parent = out[key[:-1]][0] if key else 0.5
        out[key] = ((ok + m * parent) / (n + m), n, ok)
    return out


def _estimate_for(
    est: dict[tuple[str, ...], tuple[float, int, int]], key: tuple[str, ...]
) -> tuple[float, int, int] | None:
    """A key's estimate, falling back to the deepest evaluated ancestor; None when its stratum was not
    evaluated at all (nothing is known there: such groups get weight 0)."""
    if key[:1] not in est:
        return None
    d = max(d for d in range(1, len(key) + 1) if key[:d] in est)
    return est[key] if d == len(key) else (est[key[:d]][0], 0, 0)


def allocate(weights: dict[Any, float], available: dict[Any, int], size: int) -> dict[Any, int]:
    """Split ``size`` over keys in proportion to ``weights``, capped by ``available`` (surplus passed on),
    rounded by largest remainders; deterministic (ties by key)."""
    quota = {k: 0 for k in weights}
    open_keys = {k for k in weights if weights[k] > 0 and available.get(k, 0) > 0}
    left = size
    while left > 0 and open_keys:
        total = sum(weights[k] for k in open_keys)
        share = {k: left * weights[k] / total for k in open_keys}
        capped = {k for k in open_keys if quota[k] + share[k] >= available[k]}
        if capped:
            for k in sorted(capped):
                left -= available[k] - quota[k]
                quota[k] = available[k]
            open_keys -= capped
            continue
        base = {k: math.floor(share[k]) for k in open_keys}
        rest = left - sum(base.values())
        for k in sorted(open_keys, key=lambda k: (-(share[k] - base[k]), k))[:rest]:
            base[k] += 1
        for k in open_keys:
            quota[k] += base[k]
        left = 0
    return quota


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


@dataclass
class CurriculumResult(SelectionResult):
    """A curriculum version as drawn: a selection whose ``groups`` carry the estimates and weights that drove it, and
    the spec it was drawn by (``run``)."""

    run: CurriculumSpec | None = None

    def facts(self) -> Facts:
        """What a curriculum reports (``curriculum_mixture``'s metadata): a selection's facts, the evaluation run
        that drove it, its weighting and benchmark, and its groups."""
        facts = super().facts()
        facts.values |= {
            "evaluation_run": self.run.run_id if self.run else None,
            "weighting": describe(self.run) if self.run else None,
            "benchmark_version": self.spec["benchmark"],
            "groups": Table(self.groups, GROUP_COLUMNS),
        }
        return facts


def build_curriculum(
    layout: DataLayout,
    eval_con: duckdb.DuckDBPyConnection,
    spec: CurriculumSpec,
    make_current: bool = True,
    dagster_run_id: str | None = None,
) -> CurriculumResult:
    """Estimate, weigh, allocate and pick; writes ``data/splits/curriculum/<version>/`` like Balance2 (the result's
    ``groups``: each group's estimate, weight, quota and picks)."""
    rule = decontamination(spec.decontaminate)
    est = estimates(eval_con, spec)
    scored_on = eval_con.execute(
        "SELECT any_value(split_version) FROM eval_results WHERE run_id = ?", [spec.run_id]
    ).fetchone()[0]
    bench = SplitStore(layout, BENCHMARK)
    bench_version = bench.resolve(spec.benchmark_version or scored_on)
    exclude = f"AND NOT ({BEYOND_SQL}){rule.exclude_sql(str(bench.samples(bench_version)))}"
    if not layout.strata.exists():
        raise FileNotFoundError(f"no strata table at {layout.strata}; materialize 'step_strata' first")
    keys_sql = ", ".join(f"CAST({LEVELS[lv]} AS VARCHAR) AS {lv}" for lv in spec.levels)
    with connect() as con:
        candidates = con.execute(
            f"""SELECT {keys_sql}, count(DISTINCT sample_hash) AS n FROM read_parquet('{layout.strata}')
                WHERE NOT excluded {exclude} GROUP BY ALL ORDER BY ALL"""
        ).fetchall()
    depth = len(spec.levels)
    available = {tuple(r[:depth]): int(r[depth]) for r in candidates}
    groups = []
    for key in sorted(available):
        found = _estimate_for(est, key)
        p, n, ok = found if found is not None else (None, 0, 0)
        w, filtered = (0.0, None) if p is None else weight(p, spec)
        groups.append(
            {
                "group": "/".join(key),
                **dict(zip(spec.levels, key)),
                "estimate": None if p is None else round(p, 4),
                "eval_samples": n,
                "eval_successes": ok,
                "weight": round(w, 6),
                "filtered": filtered,
                "candidates": available[key],
            }
        )
    quota = allocate(
        {g["group"]: g["weight"] for g in groups}, {g["group"]: g["candidates"] for g in groups}, spec.size
    )
    strata = []
    for g in groups:
        g["quota"] = quota[g["group"]]
        if g["quota"] > 0:
            predicate = " AND ".join(f"CAST({LEVELS[lv]} AS VARCHAR) = {_quote(g[lv])}" for lv in spec.levels)
            strata.append((g["group"], predicate, g["quota"]))
    version_spec = {
        "seed": spec.seed,
        "input": current_fingerprint(layout),
        "curriculum": {**asdict(spec), "levels": list(spec.levels)},
        "benchmark": bench_version,
        "decontaminate": spec.decontaminate,
        "picking": PICKING_RULE,
        "estimates": {g["group"]: g["estimate"] for g in groups},
    }
    version = version_id(CURRICULUM, version_spec)
    with connect() as con:
        picks, table, _, _ = select_strata(con, layout, strata, spec.seed, exclude)
    selected = {t["stratum"]: t["selected"] for t in table}
    for g in groups:
        g["selected"] = selected.get(g["group"], 0)
    drawn = write_version(
        CURRICULUM, layout, version, version_spec, picks, table, "warn", make_current, dagster_run_id=dagster_run_id
    )
    store = SplitStore(layout, CURRICULUM)
    store.write_manifest(version, {**store.manifest(version), "groups": groups})
    return CurriculumResult(**{**vars(drawn), "groups": groups}, run=spec)


#: the columns of a group in the curriculum's metadata
GROUP_COLUMNS = ["group", "estimate", "eval_samples", "weight", "filtered", "candidates", "quota", "selected"]


def record(con: duckdb.DuckDBPyConnection, layout: DataLayout) -> int:
    """Register every curriculum version in DuckDB by the one split registration
    (:func:`pipeline.store.warehouse.register_splits`): ``split_versions`` / ``split_members`` of every kind,
    curriculum included, and ``curriculum_groups`` (declared in :mod:`pipeline.store.tables`, its rows from the
    manifests' ``groups``). Returns the version count."""
    warehouse.sync(con, layout)
    return len(SplitStore(layout, CURRICULUM).versions())
