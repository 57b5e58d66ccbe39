"""Reading and writing the trajectories table."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pyarrow.dataset as ds

from pipeline.core.canonical import canonical_json, canonicalize
from pipeline.core.environment import EnvSpec
from pipeline.core.trajectory import Action, Trajectory
from pipeline.store.layout import DataLayout
from pipeline.store.schema import TRAJECTORIES


def trajectory_row(traj: Trajectory, initial_state_json: str, initial_state_hash: str, source: str) -> dict[str, Any]:
    """The trajectories-table row of ``traj``: ``source`` is the environment's source
    (``pipeline.envs.registry.source_of``), ``adapter`` the adapter its ``EnvSpec`` runs on."""
    return {
        "trajectory_id": traj.trajectory_id,
        "source": source,
        "adapter": traj.env.source,
        "env_id": traj.env_id,
        "task_id": traj.task_id,
        "category": traj.category,
        "strategy": traj.strategy,
        "fingerprint": traj.fingerprint(),
        "env_options_json": json.dumps(traj.env.options, sort_keys=True),
        "init_config_json": json.dumps(traj.env.init_config),  # key order matters to env code
        "initial_state_json": initial_state_json,
        "initial_state_hash": initial_state_hash,
        "num_actions": len(traj.actions),
        "actions": [
            {
                "turn": a.turn,
                "tool": a.name,
                "arguments_json": canonical_json(canonicalize(a.arguments)),
                "call": a.call,
                "mutated_arg": a.mutated_arg,
                "observed_after_hash": a.observed_after_hash,
            }
            for a in traj.actions
        ],
        "messages_json": json.dumps(traj.meta["messages"], default=str) if traj.meta.get("messages") else None,
        "seed": traj.seed,
        "clock_start": traj.clock_start,
    }


def row_to_trajectory(row: dict[str, Any]) -> Trajectory:
    # arguments are kept as parsed JSON: bfcl/EnvScaler call arguments are JSON values
    return Trajectory(
        trajectory_id=row["trajectory_id"],
        task_id=row["task_id"],
        env=EnvSpec(
            source=row.get("adapter") or row["source"],  # files without the adapter column held it in `source`
            env_id=row["env_id"],
            init_config=json.loads(row["init_config_json"] or "{}"),
            options=json.loads(row["env_options_json"] or "{}"),
        ),
        actions=tuple(
            Action(
                a["tool"],
                json.loads(a["arguments_json"]),
                a["turn"],
                a["call"] or "",
                a.get("mutated_arg"),
                a.get("observed_after_hash"),
            )
            for a in row["actions"] or []
        ),
        category=row["category"] or "",
        strategy=row["strategy"] or "",
        seed=int(row.get("seed") or 0),
        clock_start=row.get("clock_start") or "",
    )


def iter_trajectory_rows(
    layout: DataLayout, columns: list[str] | None = None, batch_size: int = 256, ids: list[str] | None = None
) -> Iterator[dict[str, Any]]:
    """Stream rows of the trajectories table (``layout.trajectory_files()``; optionally only ``ids``)."""
    files = layout.trajectory_files()
    if not files:
        if layout.partition is not None:
            raise FileNotFoundError(
                f"no trajectories of partition {layout.partition} ({layout.trajectories}); "
                f"materialize partition {layout.partition} of the 'trajectories' asset first"
            )
        raise FileNotFoundError(
            f"no trajectories table at {layout.trajectories_dir}; materialize the 'trajectories' asset first"
        )
    # the table's schema: files written before a column existed (``adapter``) read it as null
    dataset = ds.dataset(files, format="parquet", schema=TRAJECTORIES)
    flt = ds.field("trajectory_id").isin(ids) if ids is not None else None
    for batch in dataset.to_batches(columns=columns, filter=flt, batch_size=batch_size):
        yield from batch.to_pylist()


def iter_trajectories(layout: DataLayout, ids: list[str] | None = None) -> Iterator[Trajectory]:
    for row in iter_trajectory_rows(layout, ids=ids):
        yield row_to_trajectory(row)
