"""Benchmark split and Balance2 SFT mixture, versioned and deterministic.

Both pick per stratum with :func:`pick_diverse` (environment- and tool-diverse, seeded; one sample per (s_t, a_t)
hash), report every shortfall, materialise full samples and record a manifest with each stratum's distinct tools and
top tool share (and, for the mixture, what decontamination removed per group); the version id is derived from (seed,
input fingerprint, spec, picking rule), so the same input and seed give the same version and byte-identical sample
lists.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from pipeline.core.axes import AXES
from pipeline.core.decontamination import DEFAULT_DECONTAMINATION, decontamination
from pipeline.core.registry import Registry
from pipeline.core.strata import BALANCE2_GROUPS, BENCHMARK_CELLS, Cell, Composition
from pipeline.report.tables import Facts, Markdown, Table
from pipeline.select.greedy import pick_diverse
from pipeline.select.samples import kept_samples
from pipeline.select.shortfall import SHORTFALL_FIX, exploration_facts, reach, shortfall_lines, with_verdicts
from pipeline.select.stratify import current_fingerprint
from pipeline.store.duck import connect
from pipeline.store.layout import DataLayout
from pipeline.store.versions import BENCHMARK, MIXTURE, EmptySelection, SplitStore, version_id

if TYPE_CHECKING:
    import pandas as pd

#: what a split short of its composition does: keep what the corpus allows (and say so), or fail
SHORTFALL_CHOICES = ("warn", "fail")
#: the picking rule, part of every version's spec: a changed rule gives new versions
PICKING_RULE = "env>env-tool>least-used/2"


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
    #: per stratum: distinct (env, tool) pairs picked, the most-picked one and its share of the stratum
    tools: list[dict[str, Any]] = field(default_factory=list)
    #: mixtures: per group, candidates before decontamination and how many each rule removed
    decontamination: list[dict[str, Any]] = field(default_factory=list)
    #: benchmarks: per short cell, what the corpus reaches toward it (:func:`pipeline.select.shortfall.reach`)
    reach: dict[str, str] = field(default_factory=dict)
    #: curricula: per group, its estimate, weight, quota and picks (:mod:`pipeline.curriculum.mixture`)
    groups: list[dict[str, Any]] = field(default_factory=list)

    def facts(self) -> Facts:
        """What a selection reports (the split assets' metadata): version, seed, input, samples, per stratum
        requested / selected / environments / tools / decontamination, each shortfall with its reason (also a
        warning), and a mixture's decontamination."""
        shortfalls = "\n".join(f"- {line}" for line in self.shortfall_lines()) or "_none_"
        values = {
            "version": self.version,
            "seed": self.spec["seed"],
            "input_fingerprint": self.spec["input"],
            "samples": self.samples,
            "shortfalls": len(self.shortfalls),
            "strata": Table.of_frame(strata_report(self.strata, self.tools, self.decontamination)),
            "shortfall_detail": Markdown(shortfalls),
            "path": Path(self.path),
        }
        if self.kind == BENCHMARK:
            with connect() as con:
                envs = con.execute(
                    "SELECT env_id, count(*) AS samples FROM read_parquet(?) GROUP BY 1 ORDER BY 2 DESC, 1", [self.path]
                ).df()
            values |= {"environments": len(envs), "env_coverage": Table.of_frame(envs)}
            warning = f"benchmark {self.version} holds what the corpus allows: {'; '.join(self.shortfall_lines())} "
            return Facts(values, [f"{warning}— fix: {SHORTFALL_FIX}"] if self.shortfalls else [])
        values["decontaminated_away"] = sum(d["removed_by_key"] + d["removed_by_hash"] for d in self.decontamination)
        under = f"{self.kind.removeprefix('sft_')} {self.version} under-filled: {self.shortfall_message()}"
        return Facts(values, [under] if self.shortfalls else [])

    def shortfall_lines(self) -> list[str]:
        """One line per short stratum: a benchmark cell with its rule and what the corpus reaches
        (``difficult (|Δ| 7–12): 0 of 50, max |Δ| in the corpus 3``); else selected of requested and why."""
        if self.reach:
            return shortfall_lines({"spec": self.spec, "shortfalls": self.shortfalls, "reach": self.reach})
        lost = {d["stratum"]: d for d in self.decontamination}
        return [
            f"{s['stratum']}: {s['selected']} of {s['requested']} ({s['missing']} missing, "
            f"{s['available']} candidates{decontamination_note(lost.get(s['stratum']))})"
            for s in self.shortfalls
        ]

    def shortfall_message(self) -> str:
        """Every short stratum with its candidates and what decontamination removed, on one line."""
        return "; ".join(replace(self, reach={}).shortfall_lines())


def decontamination_note(row: dict[str, Any] | None) -> str:
    """``"; 4156 of 4160 removed by task_id decontamination against bench-…, 3 by (s_t, a_t) hash"`` —
    empty when decontamination removed nothing."""
    if not row or not (row["removed_by_key"] or row["removed_by_hash"]):
        return ""
    text = (
        f"; {row['removed_by_key']} of {row['before']} removed by "
        f"{row['key']} decontamination against {row['benchmark']}"
    )
    return text + (
        f", {row['removed_by_hash']} by {row.get('identity', '(s_t, a_t) hash')}" if row["removed_by_hash"] else ""
    )


def tool_stats(stratum: str, tools: list[tuple[str, str]]) -> dict[str, Any]:
    """Distinct (env, tool) pairs of a stratum's picks, the most frequent (ties: the smallest name)
    and its share of the stratum."""
    counts = Counter(tools)
    if not counts:
        return {"stratum": stratum, "tool_pairs": 0, "top_tool": None, "top_tool_share": 0.0}
    (env, tool), n = min(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return {
        "stratum": stratum,
        "tool_pairs": len(counts),
        "top_tool": f"{tool} ({env})",
        "top_tool_share": round(n / len(tools), 3),
    }


def strata_report(
    strata: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = None,
    decontamination: list[dict[str, Any]] | None = None,
) -> pd.DataFrame:
    """The per-stratum table of a selection (or of a manifest: ``strata``, ``tools``,
    ``decontamination``) with its tool columns and, for a mixture, the candidates before
    decontamination and how many each rule removed — what the asset metadata and the summary show."""
    import pandas as pd

    table = pd.DataFrame(strata)
    if tools:
        table = table.merge(pd.DataFrame(tools), on="stratum", how="left")
    if "top_tool" in table:  # an empty stratum has no top tool: an empty cell, not NaN
        table["top_tool"] = table["top_tool"].fillna("")
    if decontamination:
        lost = pd.DataFrame(decontamination)
        key = lost["key"].iloc[0]
        # the identity rule's column: by (env, s_t, a_t) or by (s_t, a_t)
        by_env = decontamination[0].get("identity", "").startswith("(env")
        identity = "removed_by_env_sample_hash" if by_env else "removed_by_sample_hash"
        cols = {"before": "before_decontamination", "removed_by_key": f"removed_by_{key}", "removed_by_hash": identity}
        table = table.merge(lost.rename(columns=cols)[["stratum", *cols.values()]], on="stratum", how="left")
    return table


def _strata_rel(layout: DataLayout) -> str:
    path = layout.strata
    if not path.exists():
        raise FileNotFoundError(f"no strata table at {path}; materialize 'step_strata' first")
    return f"read_parquet('{path}')"


def select_strata(
    con: duckdb.DuckDBPyConnection,
    layout: DataLayout,
    strata: list[tuple[str, str, int]],  # (name, SQL predicate, quota)
    seed: int,
    exclude_sql: str = "",
    decontamination: list[tuple[str, str]] | None = None,
    picking: str = "diverse",
) -> tuple[list[tuple[str, str]], list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Picks ``(step_id, stratum)`` in pick order, the per-stratum table, the per-stratum tool
    statistics (:func:`tool_stats`) and the per-stratum decontamination losses.

    The usable strata rows (small: no states) are scanned once into a pool with their seeded rank (a
    DuckDB table: it spills to disk beyond the memory cap, so memory does not grow with the corpus); when
    the strata do not overlap, each statistic is then one grouped query over the pool for all strata (else
    one per stratum). ``decontamination`` lists ``(name, SQL condition)`` rules applied in order: the rows
    each removes are counted per stratum (in distinct (s_t, a_t), like ``available``) before they leave
    the pool. ``picking`` is ``diverse`` (the environment-diverse picks of :func:`_pick_cell`) or
    ``uniform`` (the first ``quota`` rows by seeded rank: a plain seeded random draw, the ablation baseline)."""
    rules = decontamination or []
    flags = "".join(f", coalesce(({cond}), false) AS decon_{i}" for i, (_, cond) in enumerate(rules))
    # every row's stratum when the strata do not overlap (the compositions: cells and groups are disjoint), so that
    # each statistic below is one grouped scan of the pool for all strata instead of one scan per stratum
    which = " ".join(f"WHEN coalesce(({p}), false) THEN {i}" for i, (_, p, _) in enumerate(strata))
    member = " + ".join(f"coalesce(({p}), false)::INTEGER" for _, p, _ in strata) or "0"
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE pool AS
            SELECT step_id, env_id, tool, sample_hash, {", ".join(AXES.columns)}, balance2_group,
                   md5(CAST(? AS VARCHAR) || ':' || step_id) AS rank {flags},
                   {f"CASE {which} END" if strata else "NULL"}::INTEGER AS stratum_ix, {member} AS strata_n
            FROM {_strata_rel(layout)} WHERE NOT excluded {exclude_sql}""",
        [seed],
    )
    disjoint = (con.execute("SELECT coalesce(max(strata_n), 0) FROM pool").fetchone()[0] or 0) <= 1
    # per stratum, the predicate the statistics use: its index when disjoint, else its own SQL
    where = [f"stratum_ix = {i}" if disjoint else f"({p})" for i, (_, p, _) in enumerate(strata)]

    def per_stratum(columns: str) -> list[tuple]:
        """``columns`` (aggregates) over the pool's rows of each stratum, in strata order."""
        if disjoint:
            rows = {
                r[0]: r[1:]
                for r in con.execute(
                    f"SELECT stratum_ix, {columns} FROM pool WHERE stratum_ix IS NOT NULL GROUP BY 1"
                ).fetchall()
            }
            empty = con.execute(f"SELECT {columns} FROM pool WHERE false").fetchone()
            return [rows.get(i, empty) for i in range(len(strata))]
        return [con.execute(f"SELECT {columns} FROM pool WHERE {w}").fetchone() for w in where]

    losses: list[dict[str, Any]] = []
    if rules:
        # the distinct (s_t, a_t) before any rule and after each rule in turn
        filters = ["true"] + [" AND ".join(f"NOT decon_{j}" for j in range(i + 1)) for i in range(len(rules))]
        counted = per_stratum(", ".join(f"count(DISTINCT sample_hash) FILTER (WHERE {f})" for f in filters))
        losses = [
            {
                "stratum": name,
                "before": int(counts[0]),
                **{f"removed_by_{rule}": int(counts[i] - counts[i + 1]) for i, (rule, _) in enumerate(rules)},
            }
            for (name, _, _), counts in zip(strata, counted)
        ]
        con.execute("DELETE FROM pool WHERE " + " OR ".join(f"decon_{i}" for i in range(len(rules))))
    stats = per_stratum("count(DISTINCT sample_hash), count(DISTINCT (env_id, tool))")
    prefetched: dict[int, tuple[int, list[tuple]]] = {}
    if picking != "uniform" and disjoint and strata:
        window = max(_first_window(quota, pairs) for (_, _, quota), (_, pairs) in zip(strata, stats))
        for ix, *candidate in _candidates(con, "stratum_ix IS NOT NULL", window, "stratum_ix"):
            prefetched.setdefault(ix, (window, []))[1].append(tuple(candidate))
    usage: Counter[str] = Counter()
    pair_usage: Counter[tuple[str, str]] = Counter()
    taken: set[str] = set()
    picks: list[tuple[str, str]] = []
    table, tools = [], []
    for i, ((name, _, quota), (available, pairs)) in enumerate(zip(strata, stats)):
        if picking == "uniform":
            chosen = con.execute(
                f"SELECT step_id, env_id, tool FROM pool WHERE {where[i]} ORDER BY rank, step_id LIMIT ?", [quota]
            ).fetchall()
        else:
            chosen = _pick_cell(
                con, where[i], quota, pairs, usage, taken, pair_usage, prefetched.get(i, (0, [])) if disjoint else None
            )
        picks += [(step_id, name) for step_id, _, _ in chosen]
        table.append(
            {
                "stratum": name,
                "requested": quota,
                "available": int(available),
                "selected": len(chosen),
                "environments": len({e for _, e, _ in chosen}),
                "missing": quota - len(chosen),
            }
        )
        tools.append(tool_stats(name, [(e, t) for _, e, t in chosen]))
    con.execute("DROP TABLE pool")
    return picks, table, tools, losses


def _first_window(quota: int, pairs: int) -> int:
    """How many best-ranked candidates of each (env, tool) pair a stratum fetches first."""
    return 2 * (quota // max(pairs, 1)) + 4


def _candidates(con: duckdb.DuckDBPyConnection, predicate: str, per_pair: int, by: str = "") -> list[tuple]:
    """``([by,] env_id, rank, step_id, sample_hash, tool, pair_total)``: the best-ranked ``per_pair`` rows of every
    (env, tool) pair of the pool's rows matching ``predicate`` (per value of ``by`` too), by a top-n aggregate whose
    state is bounded per pair, so neither memory nor a sort grows with the stratum."""
    group = f"{by}, " if by else ""
    return [
        (*key, env_id, rank, step_id, sample_hash, tool, pair_total)
        for *key, env_id, tool, pair_total, top in con.execute(
            f"""SELECT {group}env_id, tool, count(*), arg_min((rank, step_id, sample_hash), rank, ?)
                FROM pool WHERE {predicate} GROUP BY ALL""",
            [per_pair],
        ).fetchall()
        for rank, step_id, sample_hash in top
    ]


def _pick_cell(
    con: duckdb.DuckDBPyConnection,
    predicate: str,
    quota: int,
    pairs: int,
    usage: Counter[str],
    taken: set[str],
    pair_usage: Counter[tuple[str, str]] | None = None,
    prefetched: tuple[int, list[tuple]] | None = None,
) -> list[tuple[str, str, str]]:
    """:func:`pick_diverse` over the best-ranked candidates of every (env, tool) pair; returns ``(step_id, env_id,
    tool)`` in pick order. Only the first ``per_pair`` of each pair are fetched (or taken from ``prefetched``: the
    window they were fetched with and the candidates, as :func:`_candidates` gives them); if picking exhausts a pair
    that had more, the cell is picked again with a larger window, so the result equals picking from all candidates."""
    pair_usage = Counter() if pair_usage is None else pair_usage
    per_pair = _first_window(quota, pairs)
    if prefetched is not None:
        per_pair = max(per_pair, prefetched[0])
    while True:
        candidates = prefetched[1] if prefetched is not None else _candidates(con, predicate, per_pair)
        prefetched = None
        trial_usage, trial_pairs, trial_taken = Counter(usage), Counter(pair_usage), set(taken)
        exhausted: set[tuple[str, str]] = set()
        chosen = pick_diverse([c[:5] for c in candidates], quota, trial_usage, trial_taken, exhausted, trial_pairs)
        truncated = {(c[0], c[4] or "") for c in candidates if c[5] > per_pair}
        if not (exhausted & truncated):
            for live, trial in ((usage, trial_usage), (pair_usage, trial_pairs), (taken, trial_taken)):
                live.clear()
                live.update(trial)
            tool_of = {c[2]: c[4] or "" for c in candidates}
            return [(step_id, env, tool_of[step_id]) for step_id, env in chosen]
        per_pair *= 4


def write_version(
    kind: str,
    layout: DataLayout,
    version: str,
    spec: dict[str, Any],
    picks: list[tuple[str, str]],
    table: list[dict[str, Any]],
    on_shortfall: str,
    make_current: bool,
    why_empty: str = "",
    tools: list[dict[str, Any]] | None = None,
    decontamination: list[dict[str, Any]] | None = None,
    dagster_run_id: str | None = None,
    reach: dict[str, str] | None = None,
) -> SelectionResult:
    """Write version ``version`` of split kind ``kind`` (any registered kind: :mod:`pipeline.store.kinds`): the
    ``picks`` (step id, stratum) materialised as ``samples.parquet``, ``sample_ids.txt`` and the manifest (``spec``,
    the per-stratum ``table`` with ``requested`` / ``selected`` / ``missing``, ``tools``, ``decontamination``), then
    its creation and, with ``make_current``, its CURRENT in the kind's history. A short stratum fails the version
    under ``on_shortfall="fail"`` (:class:`ShortfallError`); no pick at all is recorded as skipped
    (:class:`EmptySelection`, ``why_empty`` saying why)."""
    if on_shortfall not in SHORTFALL_CHOICES:
        raise ValueError(f"on_shortfall must be one of {', '.join(SHORTFALL_CHOICES)}, not {on_shortfall!r}")
    shortfalls = [t for t in table if t["missing"] > 0]
    result = SelectionResult(
        kind,
        version,
        spec,
        table,
        len(picks),
        "",
        shortfalls,
        list(tools or []),
        list(decontamination or []),
        dict(reach or {}),
    )
    if shortfalls and on_shortfall == "fail":
        detail = "; ".join(result.shortfall_lines()) if reach else result.shortfall_message()
        fix = f" — fix: {SHORTFALL_FIX}, or on_shortfall: warn to keep what the corpus allows" if reach else ""
        raise ShortfallError(f"{kind} {version} cannot be filled: {detail}{fix}")
    if not picks:  # never a usable version, whatever on_shortfall says
        asked = (
            ", ".join(f"{t['stratum']} {t['requested']} ({t['available']} candidates)" for t in table) or "no stratum"
        )
        why = why_empty or "no usable step matches any stratum"
        reason = f"{kind} {version} selects no sample: {why}; asked for {asked}"
        SplitStore(layout, kind).skipped(version, reason, dagster_run_id)
        raise EmptySelection(reason)
    store = SplitStore(layout, kind)
    out = store.samples(version)
    out.parent.mkdir(parents=True, exist_ok=True)
    kept_samples(layout, picks, out)
    (store.dir(version) / "sample_ids.txt").write_text("".join(f"{step_id}\n" for step_id, _ in picks))
    store.write_manifest(
        version,
        {
            "version": version,
            "kind": kind,
            "spec": spec,
            "strata": table,
            "samples": len(picks),
            "shortfalls": shortfalls,
            "tools": result.tools,
            "decontamination": result.decontamination,
            **({"reach": result.reach} if result.reach else {}),
            # what exploration said of the targets it left short, the budget in force and the setting to raise
            **({"exploration": facts} if shortfalls and (facts := exploration_facts(layout)) else {}),
        },
    )
    store.created(version, dagster_run_id)  # provenance lives in history.jsonl, never in the version's files
    if make_current:
        store.set_current(version, dagster_run_id)
    result.path = str(out)
    return result


def build_benchmark(
    layout: DataLayout,
    composition: Iterable[Cell] = BENCHMARK_CELLS,
    seed: int | None = 0,
    on_shortfall: str = "warn",
    make_current: bool = True,
    dagster_run_id: str | None = None,
) -> SelectionResult:
    """The EnvSimBench composition (or a custom one), maximising distinct environments; ``dagster_run_id``
    (the materializing run, None outside Dagster) goes to the version's provenance. ``seed=None``: the CURRENT
    benchmark's seed (0 when there is none; :meth:`SplitStore.seed`).

    A cell the corpus cannot fill is reported with what the corpus reaches toward it
    (:func:`pipeline.select.shortfall.reach`); with ``on_shortfall="warn"`` (the default) the version holds
    what the corpus allows, with ``"fail"`` it is a :class:`ShortfallError` naming every short cell and the fix."""
    cells = list(Composition(tuple(composition)).cells)  # checks the names are unique
    seed = SplitStore(layout, BENCHMARK).seed(seed)
    spec = {
        "seed": seed,
        "input": current_fingerprint(layout),
        "composition": [c.to_dict() for c in cells],
        "picking": PICKING_RULE,
    }
    version = version_id(BENCHMARK, spec)
    with connect() as con:
        picks, table, tools, _ = select_strata(con, layout, [(c.name, c.sql(), c.quota) for c in cells], seed)
        reached = reach(con, _strata_rel(layout), cells, table)
    reached = with_verdicts(reached, (exploration_facts(layout) if reached else {}).get("verdicts") or {})
    return write_version(
        BENCHMARK,
        layout,
        version,
        spec,
        picks,
        table,
        on_shortfall,
        make_current,
        tools=tools,
        dagster_run_id=dagster_run_id,
        reach=reached,
    )


@dataclass(frozen=True)
class MixtureComposition:
    """How an SFT mixture is composed from the decontaminated pool (its settings: these fields): ``strata``
    gives ``(name, SQL condition over the strata table, size)`` per stratum from the mixture sizes, ``picking``
    is ``diverse`` (greedy over environments and tools) or ``uniform`` (seeded rank), and ``record`` what the
    version spec records of it (None: nothing — the default composition, whose version ids stay as they were)."""

    name: str
    strata: Callable[[dict[str, int]], list[tuple[str, str, int]]]
    picking: str = "diverse"
    record: dict[str, str] | None = None


#: how an SFT mixture is composed: Balance2 (the published groups and sizes) or a uniform random draw of the
#: same size from the same pool (the ablation baseline); a plugin adds one with an ``envsim_forge.mixtures``
#: entry point (a ``MixtureComposition`` value)
MIXTURE_COMPOSITIONS: Registry[MixtureComposition] = Registry(
    "mixture composition", "envsim_forge.mixtures", check=lambda entry: isinstance(entry, MixtureComposition)
)
MIXTURE_COMPOSITIONS.register(
    MixtureComposition("balance2", lambda sizes: [(g, f"balance2_group = '{g}'", n) for g, n in sizes.items()])
)
MIXTURE_COMPOSITIONS.register(
    MixtureComposition(
        "uniform",
        lambda sizes: [("uniform", "balance2_group IS NOT NULL", sum(sizes.values()))],
        picking="uniform",
        record={"picking": "seeded rank (uniform random)"},
    )
)


def build_mixture(
    layout: DataLayout,
    sizes: dict[str, int] | None = None,
    seed: int | None = 0,
    decontaminate: str = DEFAULT_DECONTAMINATION,
    benchmark_version: str | None = None,
    on_shortfall: str = "warn",
    make_current: bool = True,
    composition: str = "balance2",
    dagster_run_id: str | None = None,
) -> SelectionResult:
    """Balance2: failure / no_change / simple / complex groups, decontaminated against a benchmark version by the rule
    ``decontaminate`` (:data:`DECONTAMINATION`; default ``trajectory``: no step of a benchmark trajectory and no
    benchmark (env, s_t, a_t); ``task_id`` / ``env_id``: no step of a benchmark task / environment and no benchmark
    (s_t, a_t) hash). What each rule removed is counted per group.

    ``composition`` names an entry of :data:`MIXTURE_COMPOSITIONS`; ``"uniform"`` is the ablation baseline: as many
    samples as the Balance2 sizes add up to, drawn uniformly at random (seeded) from the same decontaminated pool (every
    step in some Balance2 group), with no per-group quota and no diversity picking. ``seed=None``: the CURRENT mixture's
    seed (0 when there is none; :meth:`SplitStore.seed`)."""
    composed = MIXTURE_COMPOSITIONS.find(composition)
    if composed is None:
        raise ValueError(f"composition must be one of {', '.join(MIXTURE_COMPOSITIONS)}, not {composition!r}")
    # known groups only
    sizes = dict(Composition(mixture_sizes=BALANCE2_GROUPS if sizes is None else sizes).mixture_sizes)
    rule = decontamination(decontaminate)
    seed = SplitStore(layout, MIXTURE).seed(seed)
    bench = SplitStore(layout, BENCHMARK)
    bench_version = bench.resolve(benchmark_version)
    bench_samples = str(bench.samples(bench_version))
    spec = {
        "seed": seed,
        "input": current_fingerprint(layout),
        "sizes": sizes,
        "decontaminate": decontaminate,
        "benchmark": bench_version,
        "picking": PICKING_RULE,
    }
    if composed.record is not None:
        spec.update(composition=composition, **composed.record)
    version = version_id(MIXTURE, spec)
    strata = composed.strata(sizes)
    with connect() as con:
        picks, table, tools, losses = select_strata(
            con, layout, strata, seed, decontamination=rule.conditions(bench_samples), picking=composed.picking
        )
        why = ""
        if not picks:
            before, total = con.execute(
                f"SELECT count(*), count(DISTINCT {rule.key}) FROM {_strata_rel(layout)} WHERE NOT excluded"
            ).fetchone()
            (touched,) = con.execute(
                f"SELECT count(DISTINCT {rule.key}) FROM read_parquet('{bench_samples}')"
            ).fetchone()
            why = (
                f"decontamination against benchmark {bench_version} (by {rule.key} and by {rule.identity_label}) "
                f"leaves none of the {before} usable steps (the benchmark holds steps of {touched} of the {total} "
                f"{rule.key} values); fix: {_more_steps(con, layout)} or choose a smaller benchmark "
                "(resources: composition: config: cells)"
                if before
                else "there is no usable step (all excluded or none labeled)"
            )
    for row, loss in zip(table, losses):
        loss.update(
            rule=rule.name, key=rule.key, identity=rule.identity_label, benchmark=bench_version, after=row["available"]
        )
    return write_version(
        MIXTURE, layout, version, spec, picks, table, on_shortfall, make_current, why, tools, losses, dagster_run_id
    )


def _more_steps(con: duckdb.DuckDBPyConnection, layout: DataLayout) -> str:
    """How this corpus gets more steps: exploring longer when some trajectories were explored; when every one
    replays a task (bfcl-format task files, replayed as given, never explored), more tasks."""
    files = layout.trajectory_files()
    replayed_only = (
        bool(files)
        and con.execute(
            "SELECT count(*) > 0 AND count(*) FILTER (strategy = 'explore') = 0 "
            "FROM read_parquet(?, union_by_name = true)",
            [files],
        ).fetchone()[0]
    )
    if not replayed_only:
        return "collect more episodes (ops: trajectories: config: call_budget)"
    return (
        "add tasks (replayed tasks are not explored: more lines in the task files of resources: sources: config: "
        "bfcl: task_files, or more bfcl categories)"
    )


def composition_in_force(layout: DataLayout, default: Composition | None = None) -> Composition:
    """The composition the current splits were built to: the current benchmark version's cells and
    the current mixture version's sizes, each falling back to ``default``'s (the profile's: no current
    version, or one imported without a composition)."""
    default = default if default is not None else Composition()
    cells, sizes = default.cells, default.mixture_sizes
    bench = SplitStore(layout, BENCHMARK)
    if bench.current():
        recorded = bench.manifest(bench.current())["spec"].get("composition")
        if recorded:
            cells = tuple(Cell(**c) for c in recorded)
    mixture = SplitStore(layout, MIXTURE)
    if mixture.current():
        sizes = mixture.manifest(mixture.current())["spec"].get("sizes") or sizes
    return Composition(cells, sizes)
