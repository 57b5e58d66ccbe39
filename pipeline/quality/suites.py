"""great-expectations suites. Each returns a :class:`SuiteResult` that names every failed
expectation and the offending rows (by ``step_id`` or stratum), for Dagster asset checks to show.

The data is scanned with DuckDB (only the columns a suite needs) and validated as a pandas batch in
an ephemeral GX context.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
import threading
import types
from collections.abc import Callable, Iterator
from contextlib import suppress
from dataclasses import asdict, dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from pipeline.core.axes import AXES, Axes
from pipeline.core.decontamination import decontamination
from pipeline.report.tables import Table
from pipeline.store import schema, verdicts
from pipeline.store.duck import connect
from pipeline.store.layout import DataLayout
from pipeline.store.verdicts import file_digest


class _LoadedOnFirstUse(types.ModuleType):
    """A stand-in for the module of its name in ``sys.modules``: the first attribute read imports the real module
    (Python's import lock makes that thread-safe, unlike ``importlib.util.LazyLoader`` before 3.12), puts it in the
    stand-in's place and answers from it."""

    def __getattr__(self, attr: str) -> Any:
        name = self.__name__
        with _LOADING:
            if sys.modules.get(name) is self:
                del sys.modules[name]
                parent, _, child = name.rpartition(".")
                setattr(sys.modules[parent], child, importlib.import_module(name))
        return getattr(sys.modules[name], attr)


_LOADING = threading.RLock()  # re-entered when loading the module reads the stand-in


def _deferred(name: str) -> None:
    """Import the module ``name`` on its first attribute access instead of now (:class:`_LoadedOnFirstUse`), unless
    it is imported already or its package is not installed."""
    parent, _, child = name.rpartition(".")
    if name in sys.modules or importlib.util.find_spec(parent) is None or importlib.util.find_spec(name) is None:
        return  # find_spec imports the package (``parent``) itself
    sys.modules[name] = _LoadedOnFirstUse(name)
    setattr(sys.modules[parent], child, sys.modules[name])


def _great_expectations() -> Any:
    """great_expectations, configured where it is used rather than on import of this module: no usage
    analytics (unless ``GX_ANALYTICS_ENABLED`` says otherwise; GX reads it when it loads) and only its
    errors logged. ``scipy.stats``, which GX imports for its distribution expectations (none of the suites here),
    loads when first used: importing it costs about as much CPU as the rest of GX."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")
    logging.getLogger("great_expectations").setLevel(logging.ERROR)
    _deferred("scipy.stats")
    import great_expectations

    return great_expectations


@dataclass
class Failure:
    expectation: str
    column: str | None
    unexpected: int
    rows: list[dict[str, Any]]


@dataclass
class SuiteResult:
    suite: str
    evaluated: int
    rows: int
    failures: list[Failure] = field(default_factory=list)
    #: the validation this result was kept from, when the same files were validated before (:func:`kept_verdict`)
    kept_from: str | None = None

    @property
    def success(self) -> bool:
        return not self.failures

    def summary(self) -> str:
        """One line: all passed, or how many expectations failed."""
        if self.success:
            return f"all {self.evaluated} expectations of `{self.suite}` passed on {self.rows} rows"
        return f"{len(self.failures)} of {self.evaluated} expectations of `{self.suite}` failed on {self.rows} rows"

    def fact(self, limit: int = 10) -> str | Table:
        """The result as a check's metadata value: its one-line summary when it passed, else one row per failed
        expectation (its name, column, unexpected count and the first ``limit`` offending rows)."""
        if self.success:
            return self.summary()
        rows = [
            {
                "expectation": f.expectation,
                "column": f.column or "",
                "unexpected": f.unexpected,
                "first_rows": "; ".join(", ".join(f"{k}={v}" for k, v in r.items()) for r in f.rows[:limit]),
            }
            for f in self.failures
        ]
        return Table(rows, ["expectation", "column", "unexpected", "first_rows"])


def run_suite(name: str, df: pd.DataFrame, expectations: list[Any], id_columns: list[str]) -> SuiteResult:
    gx = _great_expectations()

    ctx = gx.get_context(mode="ephemeral")
    with suppress(Exception):  # older/newer config shapes: progress bars only
        ctx.variables.progress_bars = {"globally": False}
    source = ctx.data_sources.add_pandas(name)
    batch_def = source.add_dataframe_asset(name).add_batch_definition_whole_dataframe("all")
    suite = ctx.suites.add(gx.ExpectationSuite(name=name))
    for expectation in expectations:
        suite.add_expectation(expectation)
    result = batch_def.get_batch(batch_parameters={"dataframe": df}).validate(
        suite, result_format={"result_format": "COMPLETE", "unexpected_index_column_names": id_columns}
    )
    out = SuiteResult(name, len(result.results), len(df))
    for r in result.results:
        if r.success:
            continue
        info = r.result or {}
        out.failures.append(
            Failure(
                expectation=r.expectation_config.type,
                column=r.expectation_config.kwargs.get("column") or r.expectation_config.kwargs.get("column_A"),
                unexpected=int(info.get("unexpected_count") or (0 if "observed_value" in info else 1)),
                rows=[{k: _plain(v) for k, v in row.items()} for row in (info.get("unexpected_index_list") or [])][:50]
                or ([{"observed": _plain(info.get("observed_value"))}] if "observed_value" in info else []),
            )
        )
    return out


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


STEP_COLUMNS = list(schema.required_text_columns(schema.STEPS))


def _chunks(reader: pa.RecordBatchReader, rows: int) -> Iterator[pa.Table]:
    """The reader's batches gathered into tables of about ``rows`` rows (at most ``rows`` plus one batch)."""
    buffer: list[pa.RecordBatch] = []
    held = 0
    for batch in reader:
        buffer.append(batch)
        held += batch.num_rows
        if held >= rows:
            yield pa.Table.from_batches(buffer, schema=reader.schema)
            buffer, held = [], 0
    if buffer:
        yield pa.Table.from_batches(buffer, schema=reader.schema)


def axis_expectations(axes: Axes = AXES) -> list[Any]:
    """What the step table must hold on every axis: its values in the axis' closed set (outcome), at least
    its smallest value (|Δ|, argument count ≥ 0)."""
    gx = _great_expectations()
    out: list[Any] = []
    for axis in axes:
        if axis.values is not None:
            out.append(gx.expectations.ExpectColumnValuesToBeInSet(column=axis.column, value_set=list(axis.values)))
        if axis.min_value is not None:
            out.append(gx.expectations.ExpectColumnValuesToBeBetween(column=axis.column, min_value=axis.min_value))
    return out


def step_table_suite(layout: DataLayout, chunk_rows: int = 100_000, axes: Axes = AXES) -> SuiteResult:
    """Schema and nulls of the step table; every axis' expectations (:func:`axis_expectations`: outcomes from
    the closed set, |Δ| and argument counts ≥ 0); |Δ| = len(Δ); unique step ids.

    The table is validated chunk by chunk (DuckDB streams ``chunk_rows`` rows at a time into one
    pandas batch), so memory stays bounded for any corpus; uniqueness across chunks is checked by
    one DuckDB aggregate and reported as the same expectation."""
    gx = _great_expectations()

    def expectations() -> list[Any]:  # fresh objects per chunk: GX binds an expectation to one suite
        out: list[Any] = [gx.expectations.ExpectColumnToExist(column=c) for c in STEP_COLUMNS]
        out += [gx.expectations.ExpectColumnValuesToNotBeNull(column=c) for c in STEP_COLUMNS]
        return out + [
            gx.expectations.ExpectColumnValuesToBeUnique(column="step_id"),
            *axis_expectations(axes),
            gx.expectations.ExpectColumnPairValuesToBeEqual(column_A="delta_size", column_B="delta_records"),
            gx.expectations.ExpectColumnValueLengthsToEqual(column="state_before_hash", value=32),
            gx.expectations.ExpectColumnValueLengthsToEqual(column="state_after_hash", value=32),
        ]

    con = connect()
    values = [c for c in axes.columns if c not in STEP_COLUMNS]  # axis values: stored, or computed by the relation
    reader = con.sql(
        f"""SELECT {", ".join([*STEP_COLUMNS, *values])}, len(delta) AS delta_records
            FROM {axes.relation("read_parquet(?)")}""",
        params=[layout.step_parts()],
    ).to_arrow_reader(chunk_rows)  # streamed (a relation's reader yields a batch per part, whatever the size)
    total = SuiteResult("step_table", len(expectations()) + 1, 0)
    merged: dict[tuple[str, str | None], Failure] = {}
    for chunk in _chunks(reader, chunk_rows):  # one GX validation per chunk_rows rows: its cost is per call
        part = run_suite("step_table", chunk.to_pandas(), expectations(), ["step_id"])
        total.rows += part.rows
        for f in part.failures:
            seen = merged.setdefault((f.expectation, f.column), Failure(f.expectation, f.column, 0, []))
            seen.unexpected += f.unexpected
            seen.rows = (seen.rows + f.rows)[:50]
    duplicates = con.execute(
        "SELECT step_id, count(*) AS n FROM read_parquet(?) GROUP BY step_id HAVING n > 1 ORDER BY step_id LIMIT 50",
        [layout.step_parts()],
    ).fetchall()
    if duplicates:
        unique = ("expect_column_values_to_be_unique", "step_id")
        seen = merged.setdefault(unique, Failure(*unique, 0, []))
        seen.unexpected = max(seen.unexpected, sum(n for _, n in duplicates))
        seen.rows = [{"step_id": sid, "copies": n} for sid, n in duplicates]
    if total.rows == 0:
        merged[("expect_table_row_count_to_be_between", None)] = Failure(
            "expect_table_row_count_to_be_between", None, 1, [{"observed": 0}]
        )
    total.failures = list(merged.values())
    return total


def composition_suite(strata_table: list[dict[str, Any]], verdict: Path | None = None) -> SuiteResult:
    """Each stratum holds exactly what was requested — or every candidate when there were fewer. With ``verdict``
    (a file), validated once per strata table (:func:`kept`)."""
    if verdict is not None:
        return kept(verdict, strata_table, lambda: composition_suite(strata_table))
    gx = _great_expectations()

    df = pd.DataFrame(strata_table)
    df["expected"] = df[["requested", "available"]].min(axis=1)
    return run_suite(
        "split_composition",
        df,
        [gx.expectations.ExpectColumnPairValuesToBeEqual(column_A="selected", column_B="expected")],
        ["stratum"],
    )


def overlap_suite(
    mixture_samples: str, benchmark_samples: str, decontaminate: str, verdict: Path | None = None
) -> SuiteResult:
    """Zero overlap between an SFT mixture and its benchmark under the decontamination rule
    ``decontaminate`` (:data:`pipeline.core.decontamination.DECONTAMINATION`): by its key (``trajectory_id``,
    ``task_id`` or ``env_id``), by its sample identity ((env, s_t, a_t) or (s_t, a_t) hash) and by step. With
    ``verdict`` (a file), validated once per pair of sample files and rule (:func:`kept`)."""
    if verdict is not None:
        inputs = [_sized([mixture_samples, benchmark_samples]), decontaminate]
        return kept(verdict, inputs, lambda: overlap_suite(mixture_samples, benchmark_samples, decontaminate))
    gx = _great_expectations()
    rule = decontamination(decontaminate)
    identity = " || '|' || ".join(rule.identity)
    con = connect()
    columns = f"step_id, trajectory_id, task_id, env_id, sample_hash, {identity} AS sample_identity"
    df = con.execute(f"SELECT {columns} FROM read_parquet('{mixture_samples}')").df()
    bench = con.execute(f"SELECT {columns} FROM read_parquet('{benchmark_samples}')").df()
    expectations = [
        gx.expectations.ExpectColumnValuesToNotBeInSet(column=rule.key, value_set=sorted(set(bench[rule.key]))),
        gx.expectations.ExpectColumnValuesToNotBeInSet(
            column="sample_identity", value_set=sorted(set(bench["sample_identity"]))
        ),
        gx.expectations.ExpectColumnValuesToNotBeInSet(column="step_id", value_set=sorted(set(bench["step_id"]))),
    ]
    return run_suite(f"overlap_{decontaminate}", df, expectations, ["step_id"])


def kept(path: Path, inputs: Any, validate: Callable[[], SuiteResult]) -> SuiteResult:
    """``validate()``, once per ``inputs`` (any JSON-able value: what the validation reads;
    :func:`pipeline.store.verdicts.kept`): a run whose inputs did not change (a resumed or repeated run) reads the
    verdict the last validation wrote at ``path`` instead of importing great-expectations (3 s) and validating the
    same data again. The verdict is keyed by the inputs, this module's code and the great-expectations version; a
    failing verdict is kept too, with its rows."""

    def load(result: dict[str, Any], key: str) -> SuiteResult:
        failures = [Failure(**f) for f in result.pop("failures")]
        return SuiteResult(**{**result, "failures": failures, "kept_from": key})

    code = [version("great-expectations"), file_digest(__file__)]
    return verdicts.kept(path, [inputs, *code], validate, asdict, load)


def _sized(paths: list[str]) -> list[tuple[str, str]]:
    """Files as a verdict's inputs: their names (with their folder's: a split version's ``sft-…/samples.parquet``)
    and the digests of their bytes, so a moved data root keeps its verdicts and a file changed in place does not."""
    return [(f"{Path(p).parent.name}/{Path(p).name}", file_digest(p)) for p in paths]


def kept_verdict(layout: DataLayout, axes: Axes = AXES) -> SuiteResult:
    """:func:`step_table_suite`, validated once per content of the step table (:func:`kept`:
    ``quality/step_table_verdict.json``; a partition's ``step_table_verdict-<partition>.json``)."""
    axes_repr = repr([(a.column, a.values, a.min_value) for a in axes])
    inputs = [_sized(layout.step_parts()), axes_repr]
    return kept(layout.verdict("step_table"), inputs, lambda: step_table_suite(layout, axes=axes))
