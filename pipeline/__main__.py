"""``python -m pipeline summary [DATA_ROOT]``: where the data went and what it holds (no Dagster);
``python -m pipeline partitions``: the partition keys ``ENVSIM_SHARDS`` gives."""

from __future__ import annotations

import argparse
import sys

import pyarrow.parquet as pq

from pipeline.report import md_table
from pipeline.store import queries
from pipeline.store.layout import DataLayout


def summary(layout: DataLayout) -> int:
    if not queries.has_steps(layout):
        print(f"no labeled steps under {layout.root.resolve()}; run the main job first", file=sys.stderr)
        return 1
    totals = queries.step_totals(layout)
    issue_files = layout.collection_issue_files()
    issues = sum(pq.read_metadata(f).num_rows for f in issue_files)
    trajectory_files = layout.trajectory_files()
    root = layout.root.resolve()
    print(f"Data root: {root}")
    print(f"  environments  {layout.environments}")
    print(f"  tool code     {layout.tool_code}")
    if len(trajectory_files) == 1 and trajectory_files[0] == str(layout.trajectories):
        print(f"  trajectories  {layout.trajectories}  (rejected tasks: {issues}, see {layout.collection_issues})")
    else:  # partitioned (ENVSIM_SHARDS)
        print(f"  trajectories  {layout.trajectories_dir}/part-*.parquet, {len(trajectory_files)} partitions  "
              f"(rejected tasks: {issues}, see {layout.trajectories_dir}/issues-*.parquet)")
    print(f"  steps         {layout.steps_glob()}")
    print(
        f"{totals['steps']} steps from {totals['trajectories']} trajectories, "
        f"{totals['environments']} environments, {totals['tools']} tools; max |Δ| = {totals['max_delta']}"
    )
    print()
    print(md_table(queries.delta_by_outcome(layout)))
    print()
    print("Benchmark cells (candidates for the 400-sample composition):")
    print(md_table(queries.cell_coverage(layout), index=False))
    print()
    print("Balance2 SFT groups:")
    print(md_table(queries.balance2_coverage(layout), index=False))
    print()
    from pipeline.select.versions import BENCHMARK, MIXTURE, SplitStore

    for kind in (BENCHMARK, MIXTURE):
        store = SplitStore(layout, kind)
        current = store.current()
        if current:
            manifest = store.manifest(current)
            print(f"{kind}: current {current} ({manifest['samples']} samples, seed {manifest['spec']['seed']}, "
                  f"{len(manifest['shortfalls'])} shortfalls) -> {store.samples(current)}")
    exports = [p for p in (layout.root / "export").glob("*/README.md")] if (layout.root / "export").exists() else []
    for card in sorted(exports):
        print(f"Hugging Face dataset: {card.parent}  (datasets.load_dataset('{card.parent}'))")
    print(f"SQL: {layout.duckdb} (views steps, strata, trajectories, environments; tables split_versions, split_members)")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipeline")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("summary", help="print where the data is and its |Δ| × outcome table")
    p.add_argument("data_root", nargs="?", default=None)
    sub.add_parser("partitions", help="print the partition keys ENVSIM_SHARDS gives, one a line (none when unset)")
    args = parser.parse_args(argv)
    if args.command == "partitions":
        from pipeline.collect.shards import partition_keys, shard_count

        count = shard_count()
        print("\n".join(partition_keys(count)) if count else "", end="\n" if count else "")
        return 0
    return summary(DataLayout.at(args.data_root))


if __name__ == "__main__":
    sys.exit(main())
