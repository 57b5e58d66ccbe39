"""A code location for the killed-run test: two assets in the pipeline's ``duckdb`` pool. ``hold_slot``
writes its process id and then waits to be killed; ``after_kill`` just completes."""

import os
import time
from pathlib import Path

from dagster import Definitions, asset, in_process_executor

from resources.storage import DUCKDB_POOL


@asset(pool=DUCKDB_POOL)
def hold_slot() -> None:
    """Claims the duckdb slot, says which process holds it, and waits (the test kills it)."""
    marker = Path(os.environ["ENVSIM_DATA_ROOT"]) / "hold_slot.pid"
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(str(os.getpid()))
    time.sleep(600)


@asset(pool=DUCKDB_POOL)
def after_kill() -> None:
    """Needs the same duckdb slot."""


defs = Definitions(assets=[hold_slot, after_kill], executor=in_process_executor)
