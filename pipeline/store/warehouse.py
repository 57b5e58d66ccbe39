"""The DuckDB database under the data root: views over the Parquet tables of record, and tables of
split versions and their membership (all versions, so old splits stay queryable).

Callers pass a connection (in Dagster: from the DuckDB resource, inside the ``duckdb`` pool, so
only one process writes at a time).
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb

from pipeline.store.versions import BENCHMARK, MIXTURE, SplitStore
from pipeline.store.layout import DataLayout


def sync(con: duckdb.DuckDBPyConnection, layout: DataLayout) -> dict[str, int]:
    """Create/refresh views and split tables; returns row counts of what is now queryable."""
    root = layout.root.resolve()
    if layout.step_parts():
        con.execute(f"CREATE OR REPLACE VIEW steps AS SELECT * FROM read_parquet('{root}/steps/part-*.parquet')")
    # every file of layout.trajectory_files(); partition files as a glob, so that partitions
    # materialized after this sync are in the view too
    trajectory_files = [Path(f).resolve() for f in layout.trajectory_files()]
    patterns = sorted({str(f.parent / "part-*.parquet") if f.name.startswith("part-") else str(f) for f in trajectory_files})
    if patterns:
        con.execute(f"CREATE OR REPLACE VIEW trajectories AS SELECT * FROM read_parquet({patterns!r})")
    if layout.environments.exists():
        con.execute(f"CREATE OR REPLACE VIEW environments AS SELECT * FROM read_parquet('{layout.environments.resolve()}')")
    if layout.strata.exists():
        con.execute(f"CREATE OR REPLACE VIEW strata AS SELECT * FROM read_parquet('{layout.strata.resolve()}')")
    con.execute(
        """CREATE TABLE IF NOT EXISTS split_versions (
             kind VARCHAR, version VARCHAR, seed BIGINT, input_fingerprint VARCHAR, spec_json VARCHAR,
             samples INTEGER, shortfalls INTEGER, is_current BOOLEAN, PRIMARY KEY (kind, version))"""
    )
    con.execute(
        """CREATE TABLE IF NOT EXISTS split_members (
             kind VARCHAR, version VARCHAR, position INTEGER, stratum VARCHAR, step_id VARCHAR,
             trajectory_id VARCHAR, task_id VARCHAR, env_id VARCHAR, tool VARCHAR, outcome VARCHAR,
             delta_size INTEGER, args_count INTEGER, sample_hash VARCHAR, PRIMARY KEY (kind, version, position))"""
    )
    counts = {}
    for kind in (BENCHMARK, MIXTURE):
        store = SplitStore(layout, kind)
        current = store.current()
        known = {r[0] for r in con.execute("SELECT version FROM split_versions WHERE kind = ?", [kind]).fetchall()}
        for version in store.versions():
            manifest = store.manifest(version)
            if version not in known:
                spec = manifest["spec"]
                con.execute(
                    "INSERT INTO split_versions VALUES (?, ?, ?, ?, ?, ?, ?, false)",
                    [kind, version, spec["seed"], spec["input"], json.dumps(spec, sort_keys=True),
                     manifest["samples"], len(manifest["shortfalls"])],
                )
                con.execute(
                    f"""INSERT INTO split_members SELECT ?, ?, position, stratum, step_id, trajectory_id, task_id, env_id,
                               tool, outcome, delta_size, args_count, sample_hash
                        FROM read_parquet('{store.samples(version).resolve()}')""",
                    [kind, version],
                )
        con.execute("UPDATE split_versions SET is_current = (version = ?) WHERE kind = ?", [current, kind])
        counts[kind] = con.execute("SELECT count(*) FROM split_versions WHERE kind = ?", [kind]).fetchone()[0]
    con.execute(
        f"""CREATE OR REPLACE VIEW benchmark_samples AS SELECT * FROM read_parquet('{root}/splits/{BENCHMARK}/*/samples.parquet', filename = true)"""
        if SplitStore(layout, BENCHMARK).versions() else "CREATE OR REPLACE VIEW benchmark_samples AS SELECT 1 WHERE false"
    )
    return counts
