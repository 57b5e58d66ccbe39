"""What a benchmark short of its composition tells the user: each missing cell with what the corpus
reaches (``difficult (|Δ| 7–12): 0 of 50, max |Δ| in the corpus 3``) and the one-line fix.

A user's corpus often cannot fill every cell (few environments, refusals only, |Δ| never above 3). With
``on_shortfall: warn`` (the default) the benchmark holds what the corpus allows and the mixture is built
from the rest; these lines go to the ``composition_matches`` check (WARN), the version's manifest
(``reach``) and the run summary. The reachable maximum is computed from the strata table's usable steps.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import duckdb

from pipeline.core.strata import Cell
from pipeline.store.layout import DataLayout

#: the one-line fix of a benchmark shortfall: more reach, or a composition within it (the ``composition``
#: resource's ``cells``: docs/pipeline.md, "The composition in force")
SHORTFALL_FIX = (
    "add environments with larger state changes (or more scenarios), or choose a composition that fits: "
    "resources: composition: config: cells: [...] in run.yaml, each quota at most what the corpus holds "
    '(docs/pipeline.md, "The composition in force")'
)


def cell_rule(cell: dict[str, Any]) -> str:
    """A manifest cell's rule in words: ``|Δ| 7–12``, ``|Δ| 4``, ``failure, |Δ| 0``, ``|Δ| 0, 1 argument``."""
    c = Cell(**cell)
    parts = [] if c.outcome == "success" else [c.outcome]
    parts.append(f"|Δ| {c.delta_min}" if c.delta_min == c.delta_max else f"|Δ| {c.delta_min}–{c.delta_max}")
    if c.args_count is not None:
        parts.append(f"{c.args_count} argument{'' if c.args_count == 1 else 's'}")
    return ", ".join(parts)


def reach(
    con: duckdb.DuckDBPyConnection, strata: str, cells: Iterable[Cell], table: list[dict[str, Any]]
) -> dict[str, str]:
    """For every short cell of ``table`` (a selection's per-stratum rows), what the corpus (the usable steps
    of the strata relation ``strata``) reaches toward it: no step of the cell's outcome; the largest |Δ| when
    the cell's range lies beyond it; no step with the cell's argument count; else how many distinct
    candidates, from how many environments."""
    short = {t["stratum"]: t for t in table if t["missing"] > 0}
    out: dict[str, str] = {}
    for cell in cells:
        if cell.name not in short:
            continue
        steps, max_delta = con.execute(
            f"SELECT count(*), max(delta_size) FROM {strata} WHERE NOT excluded AND outcome = ?", [cell.outcome]
        ).fetchone()
        available = short[cell.name]["available"]
        if not steps:
            out[cell.name] = f"no {cell.outcome} step in the corpus"
        elif max_delta < cell.delta_min:
            of = "" if cell.outcome == "success" else f" of {cell.outcome} steps"
            out[cell.name] = f"max |Δ|{of} in the corpus {max_delta}"
        elif (
            not available
            and cell.args_count is not None
            and not con.execute(
                f"SELECT count(*) FROM {strata} WHERE NOT excluded AND outcome = ? AND args_count = ?",
                [cell.outcome, cell.args_count],
            ).fetchone()[0]
        ):
            out[cell.name] = (
                f"no {cell.outcome} step with {cell.args_count} argument{'' if cell.args_count == 1 else 's'} in "
                "the corpus"
            )
        elif not available:
            out[cell.name] = f"no candidate in the corpus (max |Δ| {max_delta})"
        else:
            envs = con.execute(
                f"SELECT count(DISTINCT env_id) FROM {strata} WHERE NOT excluded AND {cell.sql()}"
            ).fetchone()[0]
            out[cell.name] = (
                f"{available} distinct candidates in the corpus, from {envs} environment{'' if envs == 1 else 's'}"
            )
    return out


def mixture_fix(setting: str = "", plateaued: bool = False) -> str:
    """The one-line fix of a mixture short of its sizes: more candidates (exploring longer: ``setting``, the
    setting to raise with its value in force, as exploration recorded it — unless the search ``plateaued``, when
    more calls of it would not help), or sizes within them."""
    if plateaued:
        return (
            "add environments or scenarios (exploration plateaued: more calls of the same search would not help), "
            "or choose sizes that fit: resources: composition: config: mixture_sizes: {...} in run.yaml"
        )
    longer = (
        f"raise {setting} to explore longer"
        if setting
        else "a larger `ops: trajectories: config: call_budget` explores longer"
    )
    return (
        f"add environments or scenarios ({longer}), or choose sizes that fit: "
        "resources: composition: config: mixture_sizes: {...} in run.yaml"
    )


#: the three kinds of shortfall (:func:`kind_of`), in the order the summary names them
KINDS = {
    "unreachable": "the corpus cannot fill",
    "plateaued": "exploration plateaued before reaching",
    "budget": "not reached within the exploration budget",
    "environments": "too few environments reach",
}

#: how exploration's verdict on a target begins when its search plateaued (:meth:`Coverage.judge`)
PLATEAUED = "plateaued:"


def kind_of(text: str) -> str:
    """The kind of a short target from what is said of it: exploration's verdict when it gave one."""
    if PLATEAUED in text:
        return "plateaued"
    if "not reached within the budget" in text or "not reached: no scenario left" in text:
        return "budget"
    if "too few environments" in text:
        return "environments"
    return "unreachable"


def exploration_facts(layout: DataLayout) -> dict[str, Any]:
    """What exploration recorded of the targets it left short (``verdicts``: target → one of the three
    statements of :meth:`pipeline.collect.explore.Coverage.judge`), the budget in force (``budget``) and the
    setting that explores longer with its value (``setting``): read from the collection records beside the
    trajectories (one per partition). Empty when nothing was explored."""
    verdicts: dict[str, str] = {}
    budgets: list[str] = []
    settings: list[str] = []
    for path in sorted(layout.trajectories.parent.glob("*.collection.json")):
        try:
            cov = json.loads(path.read_text()).get("coverage") or {}
        except (OSError, ValueError):
            continue
        for key, verdict in (cov.get("verdicts") or {}).items():
            verdicts.setdefault(key, verdict)
        budgets += [cov["budget_text"]] if cov.get("budget_text") else []
        settings += [cov["budget_setting"]] if cov.get("budget_setting") else []
    if not (verdicts or budgets):
        return {}
    return {"verdicts": verdicts, "budget": "; ".join(dict.fromkeys(budgets)), "setting": next(iter(settings), "")}


def with_verdicts(reached: dict[str, str], verdicts: dict[str, str]) -> dict[str, str]:
    """Each short cell's reach, followed by exploration's verdict on it when it gave one."""
    return {cell: f"{text}; {verdicts[cell]}" if cell in verdicts else text for cell, text in reached.items()}


def mixture_shortfall_lines(manifest: dict[str, Any]) -> list[str]:
    """One line per group of a mixture manifest short of its size, with what decontamination left and removed:
    ``complex: 3 of 2230 (55 candidates, 52 removed by decontamination against bench-…)``."""
    lost = {d["stratum"]: d for d in manifest.get("decontamination") or []}
    lines = []
    for s in manifest.get("shortfalls") or []:
        row = lost.get(s["stratum"])
        removed = sum(v for k, v in (row or {}).items() if k.startswith("removed_by_") and isinstance(v, int))
        note = (
            f"{row['before']} candidates, {removed} removed by decontamination against {row['benchmark']}"
            if row and "before" in row
            else f"{s['available']} candidates"
        )
        verdict = ((manifest.get("exploration") or {}).get("verdicts") or {}).get(f"b2:{s['stratum']}")
        lines.append(
            f"{s['stratum']}: {s['selected']} of {s['requested']} ({note})" + (f"; {verdict}" if verdict else "")
        )
    return lines


def shortfall_lines(manifest: dict[str, Any]) -> list[str]:
    """One line per missing cell of a benchmark manifest (or a :class:`SelectionResult`'s fields in a dict:
    ``shortfalls``, ``reach``, ``spec.composition``): ``difficult (|Δ| 7–12): 0 of 50, max |Δ| in the corpus 3``."""
    rules = {c["name"]: cell_rule(c) for c in manifest.get("spec", {}).get("composition") or []}
    reached = manifest.get("reach") or {}
    lines = []
    for s in manifest.get("shortfalls") or []:
        name = s["stratum"]
        head = f"{name} ({rules[name]})" if name in rules else name
        tail = f", {reached[name]}" if name in reached else f" ({s['available']} candidates)"
        lines.append(f"{head}: {s['selected']} of {s['requested']}{tail}")
    return lines


def shortfall_report(manifest: dict[str, Any]) -> list[str]:
    """What the run summary says of a split version short of its composition: a headline, one line per missing
    benchmark cell (or mixture group) and the fix (empty when every cell is filled, or for another kind of split)."""
    explored = manifest.get("exploration") or {}
    if manifest.get("kind") == "sft_mixture":
        lines = mixture_shortfall_lines(manifest)
        if not lines:
            return []
        wanted = sum(s["requested"] for s in manifest.get("strata") or [])
        return [
            f"SHORTFALL: sft_mixture {manifest['version']} holds {manifest['samples']} of {wanted} samples: "
            f"{len(lines)} group(s) short",
            *(f"  {line}" for line in lines),
            f"  fix: {mixture_fix(explored.get('setting', ''), any(PLATEAUED in line for line in lines))}",
        ]
    lines = shortfall_lines(manifest) if manifest.get("kind") == "benchmark" else []
    if not lines:
        return []
    reached = manifest.get("reach") or {}
    kinds = [kind_of(reached.get(s["stratum"], "")) for s in manifest.get("shortfalls") or []]
    counts = ", ".join(f"{kinds.count(k)} {what}" for k, what in KINDS.items() if k in kinds)
    fixes = []
    if {"unreachable", "environments", "plateaued"} & set(kinds):
        fixes.append(f"  fix: {SHORTFALL_FIX}")
    if "budget" in kinds:
        setting = explored.get("setting") or "`ops: trajectories: config: call_budget`"
        fixes.append(f"  fix (cells not reached within the budget): explore longer, raise {setting}")
    return [
        f"SHORTFALL: benchmark {manifest['version']} holds {manifest['samples']} of "
        f"{sum(c['quota'] for c in manifest['spec'].get('composition') or []) or '?'} samples: "
        f"{len(lines)} cell(s) short: {counts} (the mixture is built from the rest)",
        *(f"  {line}" for line in lines),
        *fixes,
    ]
