"""Where the Parquet tables of record and the DuckDB file live."""

from dagster import ConfigurableResource
from pydantic import Field

from pipeline.store.layout import DEFAULT_DATA_ROOT, DataLayout


class DataStoreResource(ConfigurableResource):
    """Data root of the Parquet tables (storage of record) and ``envsim.duckdb``."""

    data_root: str = Field(default=DEFAULT_DATA_ROOT, description="Directory holding all tables (created on demand).")

    def layout(self) -> DataLayout:
        return DataLayout.at(self.data_root)
