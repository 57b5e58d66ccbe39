"""What ``./forge run`` prints after a run that succeeded, and ``./forge summary`` at any time: where the data went
and what it holds (the |Δ| × outcome table, the benchmark cells and Balance2 groups, each split's CURRENT version
and what the run changed, the scores of this run's ``simulator_eval``, the environment quality, the exports, the
SQL command), and the checks that failed (``report_failed_checks``, also after a failed run)."""

from __future__ import annotations

import sys

import pyarrow.parquet as pq

from pipeline.core import profile
from pipeline.core.settings import Settings, settings
from pipeline.core.untrusted import console, console_text
from pipeline.labeling.empty import why_empty
from pipeline.labeling.quarantine import blocking, failed_checks
from pipeline.labeling.steps import describe_inflight
from pipeline.quality.environment_report import gate_lines
from pipeline.quality.environment_report import summary_lines as quality_lines
from pipeline.quality.outcomes import CHECK as OUTCOME_CHECK
from pipeline.quality.outcomes import check_outcomes
from pipeline.report.tables import md_table
from pipeline.select.selection import composition_in_force, strata_report
from pipeline.select.shortfall import shortfall_report
from pipeline.store import duck, queries, sql_shell
from pipeline.store.layout import DataLayout
from pipeline.store.versions import SPLIT_KINDS, SplitStore


def _say(*parts: object, file=None) -> None:
    """``print`` for the console report: ids and reasons come from untrusted corpora, so no control
    character (an ESC sequence, a carriage return) reaches the terminal (newlines of the report stay)."""
    print(*(console_text(p) for p in parts), file=file)


#: the evaluation metrics the summary shows per simulator, in order (``simulator_eval``'s headline scores)
EVAL_METRICS = ("fm", "cm", "cm_reference")


def report_evaluation(evaluation: dict[str, dict[str, float]], split_version: str | None = None) -> None:
    """FM, CM and ``cm_reference`` (percent of the answered samples) per simulator, as one run's
    ``simulator_eval`` scored them (``evaluation``: simulator -> metric -> value)."""
    if not evaluation:
        return
    on = f" on {split_version}" if split_version else ""
    _say(f"Simulators scored by this run{on} (percent of answered samples; eval_runs in DuckDB):")
    rows = [
        {"simulator": name, **{m: scores.get(m) for m in EVAL_METRICS}} for name, scores in sorted(evaluation.items())
    ]
    import pandas as pd

    _say(md_table(pd.DataFrame(rows), index=False))
    _say()


def report_splits(layout: DataLayout, dagster_run_id: str | None = None) -> None:
    """The CURRENT version of each split kind and its per-stratum table (stratum first); with the Dagster run
    that just ran (``dagster_run_id``), first whether it moved CURRENT: ``benchmark current: bench-43d6 →
    bench-6ec2``, or that CURRENT stayed where it was."""
    for of_kind in SPLIT_KINDS.values():
        if of_kind.summary_note is None:  # a kind the summary does not report
            continue
        kind = of_kind.name
        store = SplitStore(layout, kind)
        current = store.current()
        if dagster_run_id is not None:
            change = store.changes_by(dagster_run_id)
            if change is not None:
                _say(f"{kind} current: {change[0] or '(none)'} → {change[1]}")
            elif current:
                _say(f"{kind} current: {current} (unchanged by this run)")
        skipped = store.skip_reason(dagster_run_id)
        if skipped:  # the corpus could not fill it at all: no version, the run went on
            _say(f"{kind}: SKIPPED by {'this run' if dagster_run_id else 'the last draw'}: {console(skipped)}")
        if current:
            manifest = store.manifest(current)
            _say(
                f"{kind}: current {current} ({manifest['samples']} samples, seed {manifest['spec']['seed']}, "
                f"{len(manifest['shortfalls'])} shortfalls) -> {store.samples(current)}"
            )
            for line in shortfall_report(manifest):  # each missing benchmark cell, what the corpus reaches, the fix
                _say(line)
            if manifest.get("tools") or manifest.get("decontamination"):
                # per stratum: tools picked and the top tool's share; for the mixture what decontamination removed
                table = strata_report(manifest["strata"], manifest.get("tools"), manifest.get("decontamination"))
                table = table.drop(columns=["requested"], errors="ignore")
                first = ["stratum"] if "stratum" in table.columns else []  # manifests store rows with sorted keys
                _say(md_table(table[first + [c for c in table.columns if c != "stratum"]], index=False))
                _say(of_kind.summary_note)  # why `available` is below the candidates of the tables above
                _say()


def environment_counts(layout: DataLayout) -> str | None:
    """The line that reconciles the environments the steps name with the catalog's (``environments.parquet``, what
    the catalog step logs), when they differ: the composites a task that involves several catalog environments runs
    as one, and the catalog environments without steps of their own (the quality line's untested ones)."""
    listed, stepped = queries.environment_ids(layout)
    if not listed or listed == stepped:
        return None
    catalog, steps = set(listed), set(stepped)
    composites = sorted(steps - catalog)
    without = sorted(catalog - steps)
    parts = [f"  environments: {len(stepped)} with steps = {len(steps & catalog)} of the catalog's {len(listed)}"]
    if composites:
        parts.append(
            f" + {len(composites)} composites (a task that involves several catalog environments runs them together "
            f"as one, e.g. {composites[0]})"
        )
    if without:
        names = ", ".join(without[:8]) + (f", … ({len(without) - 8} more)" if len(without) > 8 else "")
        parts.append(f"; the catalog's other {len(without)} have no steps of their own: {names}")
    return "".join(parts)


def report_failed_checks(layout: DataLayout, strict: bool, named_in: str | None = None) -> list[dict]:
    """Print the failed checks of the current step parts (stderr): the check, its headline, the quarantined
    environments with their reasons (held unless ``strict``); with ``named_in`` (a failed run's steps and causes),
    only the checks it names. Returns them."""
    failed = [doc for doc in failed_checks(layout) if named_in is None or doc["check"] in named_in]
    for doc in failed:
        held = doc["quarantined"] and not (strict or doc["strict"])
        _say(
            f"{'QUARANTINED BY' if held else 'FAILED'} CHECK {doc['check']}: {console(doc['headline'])}",
            file=sys.stderr,
        )
        for env, reason in sorted(doc.get("reasons", {}).items()):
            _say(f"  quarantined {console(env)}: {console(str(reason)[:300])}", file=sys.stderr)
        for line in doc.get("mismatches", [])[:10]:
            _say(f"  {console(str(line)[:300])}", file=sys.stderr)
    return failed


def summary(
    layout: DataLayout,
    dagster_run_id: str | None = None,
    evaluation: dict[str, dict[str, float]] | None = None,
    eval_version: str | None = None,
    current: Settings | None = None,
) -> int:
    """Print the summary; non-zero when there are no steps, or a check failed in strict mode
    (``ENVSIM_STRICT`` or the check's ``strict`` config) or without quarantining an environment.
    Quarantined environments are named, and the run goes on (exit 0) with the others. With the Dagster run
    that just ran (``./forge run``): whether it moved CURRENT, and the scores of its ``simulator_eval``
    (``evaluation``: simulator -> FM / CM / cm_reference, on benchmark ``eval_version``). ``current``: the
    settings of the command (strict, profile, DuckDB limits); default the process's."""
    current = current or settings()
    duck.configure(current)  # the DuckDB limits of the command's settings
    died = describe_inflight(layout)
    if died:
        _say(f"WARNING: {console(died)}", file=sys.stderr)
    strict = current.strict
    failed = report_failed_checks(layout, strict)
    stops = blocking(failed, strict)
    totals = queries.step_totals(layout) if queries.has_steps(layout) else {}
    if not totals.get("steps"):
        _say(f"no labeled steps under {layout.root.resolve()}: {why_empty(layout)}", file=sys.stderr)
        return 1
    for line in check_outcomes(layout).warnings():  # WARN: named, the run goes on
        _say(f"WARN CHECK {OUTCOME_CHECK}: {line}", file=sys.stderr)
    issue_files = layout.collection_issue_files()
    issues = sum(pq.read_metadata(f).num_rows for f in issue_files)
    trajectory_files = layout.trajectory_files()
    root = layout.root.resolve()
    _say(f"Data root: {root}")
    _say(f"  environments  {layout.environments}")
    _say(f"  tool code     {layout.tool_code}")
    if len(trajectory_files) == 1 and trajectory_files[0] == str(layout.trajectories):
        _say(f"  trajectories  {layout.trajectories}  (rejected tasks: {issues}, see {layout.collection_issues})")
    else:  # partitioned (ENVSIM_SHARDS)
        _say(
            f"  trajectories  {layout.trajectories_dir}/part-*.parquet, {len(trajectory_files)} partitions  "
            f"(rejected tasks: {issues}, see {layout.trajectories_dir}/issues-*.parquet)"
        )
    _say(f"  steps         {layout.steps_glob()}")
    _say(
        f"{totals['steps']} steps from {totals['trajectories']} trajectories, "
        f"{totals['environments']} environments, {totals['tools']} tools; max |Δ| = {totals['max_delta']}"
    )
    counts = environment_counts(layout)
    if counts:
        _say(counts)
    _say()
    _say(md_table(queries.delta_by_outcome(layout)))
    _say()
    composition = composition_in_force(layout, profile.named(current.profile).composition())
    _say(f"Benchmark cells (candidates for the {composition.benchmark_size}-sample composition):")
    _say(md_table(queries.cell_coverage(layout, composition), index=False))
    _say()
    _say("Balance2 SFT groups:")
    _say(md_table(queries.balance2_coverage(layout, composition), index=False))
    _say()
    report_splits(layout, dagster_run_id)
    report_evaluation(evaluation or {}, eval_version)
    for line in quality_lines(layout):  # the worst environments with their main problem (docs/evaluation.md)
        _say(console_text(line))
    for line in gate_lines(layout):  # each environment the gate left out of the splits, its reason, the setting
        _say(console_text(line))
    # every export where its writer recorded it (ExportConfig.directory, the rollouts' directory, or export/)
    exports = [directory / "README.md" for directory in layout.recorded_exports().values()]
    for card in sorted(c for c in exports if c.exists()):
        version = f" = {card.parent.resolve().name}" if card.parent.name == "current" else ""
        _say(f"Hugging Face dataset: {card.parent}{version}  (datasets.load_dataset('{card.parent}'))")
    _say(
        f"SQL: {sql_shell.command(layout.root)}  (or any DuckDB client on {layout.duckdb.resolve()}, from any "
        "directory; every table, view and column commented: SELECT * FROM duckdb_columns())"
    )
    if failed:
        envs = sorted({console(e) for doc in failed for e in doc.get("environments", [])})
        checks = sorted({doc["check"] for doc in failed})
        if stops:
            _say(
                f"FAILED: {', '.join(checks)} — bad labels in {', '.join(envs) or 'some environments'} "
                f"(excluded from the splits; see {layout.determinism_dir}){' [strict]' if strict else ''}",
                file=sys.stderr,
            )
            return 2
        _say(
            f"QUARANTINED: {len(envs)} environment(s) with bad labels ({', '.join(checks)}): {', '.join(envs)} — "
            f"their steps are excluded from the splits, the other environments' are in them "
            f"(see {layout.determinism_dir}; ENVSIM_STRICT=1 makes this fail the run)",
            file=sys.stderr,
        )
    return 0
