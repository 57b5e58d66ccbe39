"""Where the Parquet tables of record and the DuckDB file live: the data root of the ``store`` resource. The code
location binds one ``store`` (configured at launch) and nests it in the resources that keep files under the data root
(``duckdb``: ``envsim.duckdb``; the job launcher: ``jobs/``), so they follow it; the sensors take ``store`` too."""

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
from dagster import ConfigurableResource, InitResourceContext
from dagster_duckdb import DuckDBResource
from pydantic import Field

from pipeline.store import duck, warehouse
from pipeline.store.layout import DataLayout, default_data_root, resolve_root
from resources.launcher import JobLauncherResource


class DataStoreResource(ConfigurableResource):
    """Data root of the Parquet tables (storage of record) and ``envsim.duckdb``."""

    data_root: str = Field(
        default_factory=lambda: str(default_data_root()),
        description="Directory holding all tables (created on demand); the "
        "code location's default: $ENVSIM_DATA_ROOT or ./data.",
    )

    def layout(self) -> DataLayout:
        return DataLayout.at(self.data_root)

    def setup_for_execution(self, context: InitResourceContext) -> None:
        """Tag the run with its data root (``envsim/data_root``): the run history, the sensors and
        ``./forge run``'s timings then tell one root's runs from another's in a shared Dagster home."""
        if context.instance is not None and context.run is not None:
            context.instance.add_run_tags(context.run.run_id, {DATA_ROOT_TAG: root_tag(self.data_root)})


#: the run tag naming the data root a run wrote to
DATA_ROOT_TAG = "envsim/data_root"


def root_tag(data_root: str | Path) -> str:
    """The value of ``envsim/data_root`` for ``data_root`` (absolute, resolved)."""
    return str(resolve_root(data_root))


#: the Dagster concurrency pool of the steps that write ``envsim.duckdb`` (dagster.yaml's ``default_limit: 1``: one
#: writer at a time); every asset that writes it names this pool
DUCKDB_POOL = "duckdb"


class DataStoreDuckDBResource(DuckDBResource):
    """``envsim.duckdb`` under the ``store`` resource's data root (unless ``database`` names another file),
    opened through ``pipeline.store.duck`` (the ``ENVSIM_DUCKDB_MEMORY`` cap; ``connection_config`` adds
    or overrides DuckDB settings)."""

    store: DataStoreResource
    database: str = Field(default="", description="DuckDB file; empty: envsim.duckdb under the store's data root.")

    @property
    def path(self) -> str:
        return self.database or str(self.store.layout().duckdb)

    @contextmanager
    def get_connection(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection synced with the data root as it is now (:func:`pipeline.store.warehouse.sync`: a moved root
        answers, every view and comment is there), synced again when the asset is done with it."""
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)  # the data root is created on demand
        if not self.database:  # the data root's index of its Parquet tables: empty or invalid, made again
            duck.repair_index(self.store.layout())
        inner = DuckDBResource(
            database=self.path, connection_config={**duck.connection_config(), **self.connection_config}
        )
        with inner.get_connection() as con:
            if self.path != ":memory:":
                warehouse.sync(con, self.store.layout())
            yield con
            if self.path != ":memory:":
                warehouse.sync(con, self.store.layout())

    def teardown_after_execution(self, context: InitResourceContext) -> None:
        """After every step that holds this resource: ``envsim.duckdb`` gets a view of each table of record the
        step wrote and registers its split versions, so a plain ``duckdb`` client sees them (the one sync, as
        Dagster's DuckDB IO manager makes the view where it writes the file; assets call nothing)."""
        with self.get_connection():
            pass


class DataStoreJobLauncherResource(JobLauncherResource):
    """The job launcher of the code location: jobs' scripts, logs and Pipes files go to ``jobs/`` under the
    ``store`` resource's data root, unless ``workdir`` names another directory."""

    store: DataStoreResource
    workdir: str = Field(
        default="",
        description="Shared directory for job scripts, logs and Pipes files; empty: jobs/ under the store's data root.",
    )

    def jobs_dir(self) -> Path:
        return Path(self.workdir) if self.workdir else self.store.layout().jobs
