"""``metadata_of``: what a stage reports in pipeline/ (``Facts``) becomes asset metadata in one place."""

from pathlib import Path

from dagster import MetadataValue

from assets.metadata import metadata_of
from pipeline.report.tables import Markdown, Table


def test_each_kind_of_value_becomes_its_metadata():
    shown = metadata_of(
        {
            "n": 3,
            "note": "x",
            "path": Path("/srv/t.parquet"),
            "md": Markdown("- a"),
            "json": {"a": 1},
            "table": Table([{"k": "a", "n": 1}], ["k", "n"]),
        }
    )
    assert list(shown) == ["n", "note", "path", "md", "json", "table"]  # the order the stage gave
    assert (shown["n"], shown["note"]) == (3, "x")
    assert shown["path"] == MetadataValue.path("/srv/t.parquet") and shown["md"] == MetadataValue.md("- a")
    assert shown["json"] == MetadataValue.json({"a": 1})
    table = shown["table"]
    assert [r.data for r in table.records] == [{"k": "a", "n": 1}]
    assert [(c.name, c.type) for c in table.schema.columns] == [("k", "string"), ("n", "int")]
