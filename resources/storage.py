"""Where the Parquet tables of record and the DuckDB file live."""

from dagster import ConfigurableResource
from pydantic import Field

from pipeline.store.layout import DataLayout, default_data_root


class DataStoreResource(ConfigurableResource):
    """Data root of the Parquet tables (storage of record) and ``envsim.duckdb``."""

    data_root: str = Field(
        default_factory=lambda: str(default_data_root()),
        description="Directory holding all tables (created on demand); default $ENVSIM_DATA_ROOT or ./data.",
    )

    def layout(self) -> DataLayout:
        return DataLayout.at(self.data_root)
