"""Reading Dagster metadata in tests: the text of a table metadata value (its column names and cells)."""

from dagster import TableMetadataValue


def text(value) -> str:  # any metadata value
    """Column names and every cell of a table, or the text of any other metadata value."""
    if isinstance(value, TableMetadataValue):
        names = " ".join(c.name for c in value.schema.columns)
        return names + " " + " ".join(str(v) for record in value.records for v in record.data.values())
    return str(value.value)
