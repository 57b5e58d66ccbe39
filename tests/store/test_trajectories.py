"""The trajectories table keeps the source and the adapter apart, and reads files written before the adapter had
a column of its own."""

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.core.environment import EnvSpec
from pipeline.core.trajectory import Action, Trajectory
from pipeline.store.layout import DataLayout
from pipeline.store.schema import TRAJECTORIES
from pipeline.store.trajectories import iter_trajectories, trajectory_row


def _trajectory(tid: str) -> Trajectory:
    return Trajectory(
        tid, "task", EnvSpec("envscaler", "builtin/shop", {"stock": {}}, {}), (Action("count", {}),), strategy="explore"
    )


def test_source_and_adapter_are_stored_apart_and_old_files_still_read(tmp_path):
    layout = DataLayout.at(tmp_path / "data")
    layout.trajectories_dir.mkdir(parents=True)
    new = trajectory_row(_trajectory("new"), "{}", "0" * 32, source="builtin")
    assert (new["source"], new["adapter"]) == ("builtin", "envscaler")
    pq.write_table(pa.Table.from_pylist([new], schema=TRAJECTORIES), layout.trajectories_dir / "part-builtin-1.parquet")
    # a partition written before the adapter column: its `source` held the adapter
    old = {
        k: v
        for k, v in trajectory_row(_trajectory("old"), "{}", "0" * 32, source="envscaler").items()
        if k != "adapter"
    }
    old_schema = pa.schema([f for f in TRAJECTORIES if f.name != "adapter"])
    pq.write_table(pa.Table.from_pylist([old], schema=old_schema), layout.trajectories_dir / "part-builtin-0.parquet")
    # read in either order, each trajectory comes back with the adapter its environment runs on
    read = {t.trajectory_id: t for t in iter_trajectories(layout)}
    assert {tid: t.env.source for tid, t in read.items()} == {"new": "envscaler", "old": "envscaler"}
    assert read["new"].fingerprint() == _trajectory("new").fingerprint()
