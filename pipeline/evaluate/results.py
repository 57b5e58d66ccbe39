"""Evaluation results in DuckDB (``eval_runs``, ``eval_results`` and the breakdown views) and the
summary table / CM-vs-|Δ| plot for the UI. Every table and view counts ``samples``, ``answered`` and
``request_failed`` apart; the metrics are over the answered samples only (a failed request is the
endpoint's failure, not a wrong answer). Every result row and run names the weights that answered
(``weights_id``: a checkpoint version or weights hash; NULL for an endpoint whose weights are unknown)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from pipeline.core.axes import AXES, Axes
from pipeline.core.strata import BENCHMARK_GROUP_SQL
from pipeline.report.plots import line_plot
from pipeline.report.tables import Facts, Markdown, Table
from pipeline.store import catalog, tables, warehouse
from pipeline.store.duck import connect

#: a sample whose request failed (the endpoint's failure) is no answer: it is counted apart and left out of
#: every metric's denominator (rows from before ``status`` existed: a non-NULL ``request_error``)
ANSWERED_SQL = "(request_error IS NULL)"


def _pct(expr: str, name: str) -> str:
    return f"round(100 * avg(({expr})::INT) FILTER (WHERE {ANSWERED_SQL}), 1) AS {name}"


#: a run's headline metrics: ``eval_runs`` columns, and ``simulator_eval``'s ``<metric>/<simulator>`` metadata
HEADLINE = ("fm", "cm", "cm_reference", "fm_reference")
_COUNTS = ["count(*) AS samples", f"count(*) FILTER (WHERE {ANSWERED_SQL}) AS answered"]

_METRICS = ", ".join(
    [
        *_COUNTS,
        f"count(*) FILTER (WHERE NOT {ANSWERED_SQL}) AS request_failed",
        *(_pct(m, m) for m in (*HEADLINE, "cm_changed_paths")),
        _pct("NOT parse_ok", "parse_fail_pct"),
    ]
)

#: ``eval_results`` columns, in table order (one row per sample and run): its declaration's
COLUMNS: Mapping[str, str] = tables.table("eval_results").sql_columns


def breakdown_views(axes: Axes = AXES) -> dict[str, str]:
    """The ``eval_by_*`` views: name -> the key they group by (the benchmark group, the value of every axis
    with ``by_value``, the environment and the cell)."""
    return {
        "eval_by_group": f"{BENCHMARK_GROUP_SQL} AS grp",
        **{f"eval_by_{a.name}": a.column for a in axes if a.by_value},
        "eval_by_env": "env_id",
        "eval_by_cell": "stratum",
    }


def load_run(con: duckdb.DuckDBPyConnection, results: Path, run_id: str, axes: Axes = AXES) -> None:
    """Replace a run's rows with the latest result per step from its JSON-lines file (missing metrics are NULL),
    then (re-)create ``eval_runs`` and the breakdown views over ``axes``."""
    warehouse.ensure_table(con, "eval_results")  # new columns are added to an existing one, NULL for its rows
    con.execute("DELETE FROM eval_results WHERE run_id = ?", [run_id])
    if results.exists() and results.stat().st_size:
        spec = ", ".join(f"{c}: '{t}'" for c, t in COLUMNS.items())
        read = {  # rows written before the column existed
            "prompt": "coalesce(prompt, 'envsim')",
            "status": "coalesce(status, CASE WHEN request_error IS NULL THEN 'answered' ELSE 'request_failed' END)",
        }
        select = ", ".join(read.get(c, c) for c in COLUMNS)
        con.execute(
            f"""INSERT INTO eval_results ({", ".join(COLUMNS)})
                SELECT {select}
                FROM read_json('{results}', format = 'newline_delimited', ignore_errors = true, columns = {{{spec}}})
                WHERE run_id = ?
                QUALIFY row_number() OVER (PARTITION BY step_id ORDER BY seq DESC) = 1""",
            [run_id],
        )
    con.execute(
        f"""CREATE OR REPLACE TABLE eval_runs AS
            SELECT run_id, any_value(simulator) AS simulator, any_value(model) AS model,
            any_value(weights_id) AS weights_id,
                   any_value(split_version) AS split_version,
                   string_agg(DISTINCT prompt, ',') AS prompt,
                   {_METRICS}, round(avg(latency_s) FILTER (WHERE {ANSWERED_SQL}), 4) AS mean_latency_s,
                   sum(prompt_tokens) AS prompt_tokens,
                   sum(completion_tokens) AS completion_tokens
            FROM eval_results GROUP BY run_id"""
    )
    for name, key in breakdown_views(axes).items():
        con.execute(
            f"CREATE OR REPLACE VIEW {name} AS SELECT run_id, {key}, {_METRICS} FROM {axes.relation('eval_results')} "
            "GROUP BY ALL ORDER BY ALL"
        )
    warehouse.derived_views(con, axes)  # eval_results_strata
    catalog.describe(con)


def run_summary(path: Path, run_id: str) -> dict[str, Any]:
    """A run's ``eval_runs`` row (samples, FM, CM and the other metrics, request errors), its parse failures and CM per
    group, from its results file alone (the SQL of :func:`load_run` on an in-memory DuckDB)."""
    with connect() as con:
        load_run(con, path, run_id)
        cur = con.execute(
            "SELECT * EXCLUDE (run_id, simulator, model, split_version) FROM eval_runs WHERE run_id = ?", [run_id]
        )
        overall = dict(zip([d[0] for d in cur.description], cur.fetchone()))
        groups = dict(con.execute("SELECT grp, cm FROM eval_by_group WHERE run_id = ?", [run_id]).fetchall())
        parse_failures = con.execute(
            "SELECT count(*) FILTER (NOT parse_ok) FROM eval_results WHERE run_id = ?", [run_id]
        ).fetchone()[0]
    return {**overall, "parse_failures": parse_failures, "cm_by_group": groups}


def summary(con: duckdb.DuckDBPyConnection, run_ids: list[str]) -> pd.DataFrame:
    """Per run: samples, answered and request_failed (apart: failed requests are not in any metric), overall
    FM / CM / cm_reference / fm_reference / cm_changed_paths and parse failures over the answered samples,
    and per group both CM and cm_reference (``cm_<group>``, ``cm_reference_<group>``)."""
    overall = con.execute(
        "SELECT run_id, prompt, samples, answered, request_failed, fm, cm, cm_reference, fm_reference, "
        "cm_changed_paths, parse_fail_pct, mean_latency_s FROM eval_runs WHERE run_id IN (SELECT unnest(?))",
        [run_ids],
    ).df()
    groups = con.execute(
        "SELECT run_id, grp, cm, cm_reference FROM eval_by_group WHERE run_id IN (SELECT unnest(?))", [run_ids]
    ).df()
    for metric in ("cm", "cm_reference"):
        pivot = groups.pivot_table(index="run_id", columns="grp", values=metric).add_prefix(f"{metric}_").reset_index()
        overall = overall.merge(pivot, on="run_id", how="left")
    return overall


def headline_scores(con: duckdb.DuckDBPyConnection, run_ids: list[str]) -> dict[str, float]:
    """``<metric>/<simulator>`` -> score (FM, CM, cm_reference, fm_reference) of each run: numbers a run
    history can chart."""
    rows = con.execute(
        f"SELECT simulator, {', '.join(HEADLINE)} FROM eval_runs WHERE run_id IN (SELECT unnest(?)) ORDER BY simulator",
        [run_ids],
    ).fetchall()
    return {f"{m}/{row[0]}": float(value) for row in rows for m, value in zip(HEADLINE, row[1:]) if value is not None}


#: what a per-cell or per-|Δ|-bucket report shows of each run: answered samples, parse rate and the metrics
_REPORT = ", ".join([*_COUNTS, _pct("parse_ok", "parse_pct"), *(_pct(m, m) for m in ("fm", "cm", "cm_reference"))])


def breakdowns(axes: Axes = AXES) -> dict[str, str]:
    """The keys a run's scores break down by (name -> SQL over ``eval_results``): the benchmark cell
    (``stratum``) and the label of every axis with ``by_label`` (the |Δ| bucket)."""
    return {"cell": "stratum", **{a.label: a.label_sql() for a in axes if a.by_label}}


def breakdown(con: duckdb.DuckDBPyConnection, run_ids: list[str], by: str = "cell", axes: Axes = AXES) -> pd.DataFrame:
    """Per run and per ``by`` (``cell`` or an axis label: ``delta_bucket``; :func:`breakdowns`), plus an ``all`` row per
    run: samples, answered, parse rate, FM, CM and ``cm_reference`` (percent of the answered samples)."""
    keys = breakdowns(axes)
    if by not in keys:
        raise ValueError(f"breakdown by one of {sorted(keys)}, not {by!r}")
    return con.execute(
        f"""SELECT run_id, coalesce(CAST(({keys[by]}) AS VARCHAR), 'all') AS {by}, {_REPORT}
            FROM {axes.relation("eval_results")} WHERE run_id IN (SELECT unnest(?))
            GROUP BY GROUPING SETS ((run_id, ({keys[by]})), (run_id)) ORDER BY run_id, {by}""",
        [run_ids],
    ).df()


def cm_by_delta_plot(con: duckdb.DuckDBPyConnection, run_ids: list[str], path: Path) -> str:
    """Plot CM (solid) and cm_reference (dashed) against |Δ| per run; returns a base64 PNG."""
    df = con.execute(
        "SELECT run_id, delta_size, cm, cm_reference, samples FROM eval_by_delta WHERE run_id IN (SELECT unnest(?)) "
        "ORDER BY run_id, delta_size",
        [run_ids],
    ).df()

    def draw(ax: Any) -> None:
        for rid, part in df.groupby("run_id"):  # each run's rows in |Δ| order (the query's)
            (line,) = ax.plot(part["delta_size"], part["cm"], marker="o", label=f"{rid} CM")
            ax.plot(
                part["delta_size"],
                part["cm_reference"],
                linestyle="--",
                color=line.get_color(),
                alpha=0.6,
                label=f"{rid} cm_reference",
            )

    text = df.to_csv(index=False)
    return line_plot(path, draw, "|Δ| (state fields changed)", "Config Match, %", ylim=(-5, 105), data=text)


def run_facts(
    con: duckdb.DuckDBPyConnection, eval_dir: Path, version: str, run_ids: list[str], samples: int
) -> tuple[Facts, tuple[Any, ...] | None]:
    """What an evaluation of ``run_ids`` on benchmark ``version`` reports (``simulator_eval``'s metadata): the
    headline scores (numbers, charted over runs), the summary, the CM-by-|Δ| plot (written to ``eval_dir``) — and
    the oracle's (fm, cm, samples) on the version (None: not evaluated)."""
    table = summary(con, run_ids)
    path = eval_dir / "cm_by_delta.png"
    plot = cm_by_delta_plot(con, run_ids, path)
    scores = headline_scores(con, run_ids)  # fm/<simulator>, cm/<simulator>, …
    oracle = con.execute(
        "SELECT fm, cm, samples FROM eval_runs WHERE simulator = 'oracle' AND split_version = ?", [version]
    ).fetchone()
    values = {"split_version": version, "samples": samples, **scores, "summary": Table.of_frame(table)}
    values |= {"cm_by_delta": Markdown(f"![CM vs |Δ|](data:image/png;base64,{plot})"), "plot_path": path.resolve()}
    return Facts(values), oracle
