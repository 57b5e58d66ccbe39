"""Adding a stratification axis is one entry: a toy axis (the length of the tool's name, bucketed) added with
``with_axis`` flows into the strata table, the sample schema, the evaluation breakdowns and the step table's
quality expectations — and the default axes' outputs are untouched by it."""

import hashlib
import json

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.core.axes import AXES, Axis, bucket_rules, with_axis
from pipeline.evaluate import results
from pipeline.quality.suites import step_table_suite
from pipeline.select.stratify import stratify
from pipeline.store import schema
from pipeline.store.layout import DataLayout

#: the toy axis: computed from a stored column (no new step column), bucketed 0-4 / 5+, at least 1
TOOL_LENGTH = Axis(
    "tool_length",
    "tool_length",
    "INTEGER",
    value_sql="length(tool)",
    extract=lambda r: len(r["tool"]),
    label="tool_length_bucket",
    rules=bucket_rules("tool_length", (("short", 4), ("long", None))),
    label_doc="tool name length bucket",
    min_value=1,
    by_value=True,
    by_label=True,
)
TOY = with_axis(TOOL_LENGTH)

#: the strata table's columns with the default axes
DEFAULT_STRATA = [
    "step_id",
    "trajectory_id",
    "task_id",
    "env_id",
    "source",
    "adapter",
    "tool",
    "step_index",
    "outcome",
    "delta_size",
    "delta_bucket",
    "args_count",
    "args_cardinality",
    "benchmark_cell",
    "balance2_group",
    "excluded",
    "excluded_reason",
    "state_before_hash",
    "state_after_hash",
    "sample_hash",
]
#: (tool, outcome, |Δ|, argument count) of the toy step table; the empty tool name breaks the toy expectation
STEPS = [("get", "success", 0, 0), ("read", "failure", 0, 1), ("update", "success", 2, 2), ("", "success", 1, 3)]


def _hash(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()


@pytest.fixture()
def layout(tmp_path) -> DataLayout:
    layout = DataLayout.at(tmp_path / "data")
    rows = []
    for i, (tool, outcome, delta_size, args) in enumerate(STEPS):
        delta = [{"op": "replace", "path": ["k", str(n)], "before": "0", "after": "1"} for n in range(delta_size)]
        rows.append(
            {
                "step_id": f"t#{i}",
                "trajectory_id": "t",
                "source": "builtin",
                "adapter": "envscaler",
                "env_id": "builtin/toy",
                "task_id": "task",
                "step_index": i,
                "tool": tool,
                "arguments_json": json.dumps({f"a{n}": n for n in range(args)}),
                "args_count": args,
                "raw_observation": "ok",
                "outcome": outcome,
                "delta": delta,
                "delta_size": delta_size,
                "state_before_hash": _hash(f"s{i}"),
                "state_after_hash": _hash(f"s{i + 1}"),
            }
        )
    layout.steps_dir.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema.STEPS), layout.steps_dir / "part-toy.parquet")
    return layout


def test_the_toy_axis_is_a_strata_column_value_then_label(layout):
    stratify(layout)
    assert pq.read_schema(layout.strata).names == DEFAULT_STRATA  # the default axes: the table as always
    stratify(layout, axes=TOY)
    table = pq.read_table(layout.strata)
    at = DEFAULT_STRATA.index("args_cardinality") + 1
    assert table.schema.names == DEFAULT_STRATA[:at] + ["tool_length", "tool_length_bucket"] + DEFAULT_STRATA[at:]
    got = table.select(["tool", "tool_length", "tool_length_bucket"]).to_pylist()
    by_tool = {r["tool"]: (r["tool_length"], r["tool_length_bucket"]) for r in got}
    assert by_tool == {"get": (3, "0-4"), "read": (4, "0-4"), "update": (6, "5+"), "": (0, "0-4")}
    # the Python labels are generated from the same rules and agree with the SQL
    for row in table.to_pylist():
        assert TOY.labels_of(row) == {k: row[k] for k in ("delta_bucket", "args_cardinality", "tool_length_bucket")}
    assert TOY.key_columns() == ("outcome", "delta_bucket", "args_cardinality", "tool_length_bucket")


def test_the_toy_axis_labels_samples():
    names = schema.sample_schema(TOY).names
    assert names == [
        *schema.SAMPLE.names[: names.index("tool_length_bucket")],
        "tool_length_bucket",
        *schema.SAMPLE.names[names.index("tool_length_bucket") :],
    ]
    assert "tool_length_bucket" not in schema.SAMPLE.names


def test_the_toy_axis_is_an_evaluation_breakdown(tmp_path):
    lines = [
        {
            "run_id": "sim@bench-x",
            "simulator": "sim",
            "split_version": "bench-x",
            "step_id": f"t#{i}",
            "stratum": "s",
            "env_id": "builtin/toy",
            "tool": tool,
            "outcome": outcome,
            "delta_size": d,
            "args_count": a,
            "fm": True,
            "cm": i % 2 == 0,
            "parse_ok": True,
            "status": "answered",
            "seq": i,
        }
        for i, (tool, outcome, d, a) in enumerate(STEPS)
    ]
    path = tmp_path / "results.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    con = duckdb.connect()
    results.load_run(con, path, "sim@bench-x", axes=TOY)
    assert con.execute("SELECT tool_length, samples, cm FROM eval_by_tool_length ORDER BY ALL").fetchall() == [
        (0, 1, 0.0),
        (3, 1, 100.0),
        (4, 1, 0.0),
        (6, 1, 100.0),
    ]
    by_bucket = results.breakdown(con, ["sim@bench-x"], "tool_length_bucket", axes=TOY)
    assert by_bucket[["tool_length_bucket", "samples", "cm"]].values.tolist() == [
        ["0-4", 3, 33.3],
        ["5+", 1, 100.0],
        ["all", 4, 50.0],
    ]
    assert con.execute("SELECT DISTINCT tool_length_bucket FROM eval_results_strata ORDER BY 1").fetchall() == [
        ("0-4",),
        ("5+",),
    ]
    with pytest.raises(ValueError, match="breakdown by one of"):
        results.breakdown(con, ["sim@bench-x"], "tool_length_bucket")  # not an axis of the default breakdowns
    assert "eval_by_tool_length" not in results.breakdown_views(AXES)


def test_the_toy_axis_is_a_quality_expectation(layout):
    assert step_table_suite(layout).success  # the default axes: nothing is wrong with the toy table
    result = step_table_suite(layout, axes=TOY)
    assert [(f.expectation, f.column, f.unexpected) for f in result.failures] == [
        ("expect_column_values_to_be_between", "tool_length", 1)
    ]
    assert result.failures[0].rows == [{"step_id": "t#3", "tool_length": 0}]
    assert result.evaluated == step_table_suite(layout).evaluated + 1
