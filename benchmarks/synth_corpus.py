"""Deterministic synthetic corpus in the pipeline's own labeled-step format (trajectories table +
step parts), for scale benchmarks.

    python benchmarks/synth_corpus.py OUT_DIR --steps 100000 [--envs 200] [--state-kb 2 20] [--seed 0]

States look like the ones EnvScaler-style environments have: a few entity tables (``orders``,
``customers``, …) of records with mixed field types (strings, ints, floats, bools, tag lists),
plus settings and counters, 2–20 KB of canonical JSON each. Each trajectory has 10 steps; a step
changes |Δ| entries (mix: ~45% 0, 25% 1–2, 20% 3–6, 8% 7–12, 2% beyond) — mostly field updates
at nested paths, some records added or removed; ~20% of the steps are failures at |Δ| = 0 and
~2% errors. Hashes and Δs are real (the generator applies every Δ and hashes the canonical
state), so states can be rebuilt and verified like those of a real run.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.core.canonical import canonical_json, text_hash
from pipeline.store import schema
from pipeline.store.layout import DataLayout

STEPS_PER_TRAJECTORY = 10
DELTA_MIX = [
    (0, 45),
    (1, 15),
    (2, 10),
    (3, 6),
    (4, 5),
    (5, 5),
    (6, 4),
    (7, 2),
    (8, 2),
    (9, 1),
    (10, 1),
    (11, 1),
    (12, 1),
    (15, 2),
]
TABLES = ["orders", "customers", "products", "tickets", "accounts", "shipments", "bookings", "employees"]
STATUSES = ["pending", "active", "shipped", "closed", "cancelled", "on_hold", "refunded"]
WORDS = [
    "alpha",
    "bravo",
    "delta",
    "echo",
    "gold",
    "harbor",
    "indigo",
    "juniper",
    "kilo",
    "lima",
    "metro",
    "nova",
    "oscar",
    "prime",
    "quartz",
    "river",
    "sierra",
    "tango",
    "ultra",
    "violet",
    "willow",
    "zulu",
]
FIELD_KINDS = ["status", "quantity", "price", "active", "note", "tags", "updated_at", "owner", "priority"]


def _value(rng: random.Random, kind: str) -> Any:
    if kind == "status":
        return rng.choice(STATUSES)
    if kind in ("quantity", "priority"):
        return rng.randint(0, 500)
    if kind == "price":
        return round(rng.uniform(1, 2000), 2)
    if kind == "active":
        return rng.random() < 0.5
    if kind == "tags":
        return rng.sample(WORDS, rng.randint(0, 4))
    if kind == "updated_at":
        return (
            f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
            f"T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:00Z"
        )
    if kind == "owner":
        return f"user_{rng.randint(1, 9999):04d}"
    return " ".join(rng.choices(WORDS, k=rng.randint(2, 8)))


def _record(rng: random.Random, rid: str) -> dict[str, Any]:
    return {"id": rid, "name": " ".join(rng.choices(WORDS, k=2)).title(), **{k: _value(rng, k) for k in FIELD_KINDS}}


def _initial_state(rng: random.Random, target_bytes: int) -> tuple[dict[str, Any], int]:
    tables = rng.sample(TABLES, rng.randint(2, 5))
    state: dict[str, Any] = {t: {} for t in tables}
    state["settings"] = {
        "currency": rng.choice(["USD", "EUR", "GBP"]),
        "timezone": "UTC",
        "max_items": rng.randint(5, 50),
        "features": {"audit": rng.random() < 0.5, "notifications": rng.random() < 0.5},
    }
    n = 0
    size = len(canonical_json(state))
    while size < target_bytes:
        table = rng.choice(tables)
        rid = f"{table[:3]}_{n:05d}"
        rec = _record(rng, rid)
        state[table][rid] = rec
        size += len(canonical_json(rec)) + len(rid) + 4
        n += 1
    state["counters"] = {"next_id": n, "version": 1}
    return state, n


def _records_of(state: dict[str, Any]) -> list[tuple[str, str]]:
    return [(t, rid) for t in TABLES if t in state for rid in state[t]]


def _make_delta(rng: random.Random, state: dict[str, Any], k: int, next_id: int) -> tuple[list[dict[str, Any]], int]:
    """k records: field updates at nested paths, some adds and removes of whole records; applied in place."""
    delta = []
    touched: set[tuple[str, str]] = set()  # records added or removed in this step
    updated: set[tuple[str, str]] = set()  # records with a field update in this step
    records = _records_of(state)
    tables = [t for t in TABLES if t in state]
    while len(delta) < k:
        roll = rng.random()
        if roll < 0.1 or not records:
            table = rng.choice(tables)
            rid = f"{table[:3]}_{next_id:05d}"
            next_id += 1
            rec = _record(rng, rid)
            state[table][rid] = rec
            touched.add((table, rid))
            delta.append({"op": "add", "path": [table, rid], "before": None, "after": canonical_json(rec)})
            continue
        table, rid = rng.choice(records)
        if (table, rid) in touched or rid not in state[table]:
            continue
        if roll < 0.15:
            if (table, rid) in updated:
                continue
            old = state[table].pop(rid)
            touched.add((table, rid))
            delta.append({"op": "remove", "path": [table, rid], "before": canonical_json(old), "after": None})
            continue
        field = rng.choice(FIELD_KINDS)
        old, new = state[table][rid][field], _value(rng, field)
        if new == old or any(d["path"] == [table, rid, field] for d in delta):
            continue
        state[table][rid][field] = new
        updated.add((table, rid))
        delta.append(
            {"op": "replace", "path": [table, rid, field], "before": canonical_json(old), "after": canonical_json(new)}
        )
    delta.sort(key=lambda d: d["path"])
    return delta, next_id


def generate(
    out: Path, steps: int, envs: int = 200, state_kb: tuple[int, int] = (2, 20), seed: int = 0, part_steps: int = 50_000
) -> DataLayout:
    layout = DataLayout.at(out)
    layout.steps_dir.mkdir(parents=True, exist_ok=True)
    layout.trajectories_dir.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    sizes, weights = zip(*DELTA_MIX)
    traj_writer = pq.ParquetWriter(layout.trajectories, schema.TRAJECTORIES, compression="zstd")
    rows: list[dict[str, Any]] = []
    trajs: list[dict[str, Any]] = []
    part = made = 0
    n_traj = (steps + STEPS_PER_TRAJECTORY - 1) // STEPS_PER_TRAJECTORY
    for t in range(n_traj):
        env = f"synth/env{t % envs:04d}"
        state, next_id = _initial_state(rng, rng.randint(state_kb[0] * 1024, state_kb[1] * 1024))
        text = canonical_json(state)
        tid = f"{env}/task{t:07d}/synth"
        trajs.append(
            {
                "trajectory_id": tid,
                "source": "synth",
                "env_id": env,
                "task_id": f"task{t:07d}",
                "category": "synth",
                "strategy": "synthetic",
                "fingerprint": f"{seed}-{t}",
                "env_options_json": "{}",
                "init_config_json": "{}",
                "initial_state_json": text,
                "initial_state_hash": text_hash(text),
                "num_actions": 0,
                "actions": [],
                "messages_json": None,
            }
        )
        before_hash = trajs[-1]["initial_state_hash"]
        for i in range(min(STEPS_PER_TRAJECTORY, steps - made)):
            k = rng.choices(sizes, weights)[0]
            roll = rng.random()
            error, failure = k == 0 and roll < 0.04, k == 0 and 0.04 <= roll < 0.48
            args = {f"arg{j}": _value(rng, FIELD_KINDS[j]) for j in range(rng.randint(0, 4))}
            if error:
                raw = "Error: KeyError('missing record')"
                observation = json.dumps(raw)
                delta: list[dict[str, Any]] = []
            elif failure:
                table = rng.choice([t for t in TABLES if t in state])
                rid = rng.choice(list(state[table]) or ["none"])
                raw = repr({"success": False, "error": f"{table[:-1]} {rid} is {rng.choice(STATUSES)}"})
                observation = None
                delta = []
            else:
                delta, next_id = _make_delta(rng, state, k, next_id)
                table = rng.choice([t for t in TABLES if t in state])
                sample = next(iter(state[table].values()), {})
                raw = repr(
                    {"success": True, "data": sample}
                    if not delta
                    else {
                        "success": True,
                        "message": f"{len(delta)} change(s) applied to {'/'.join(delta[0]['path'][:2])}",
                    }
                )
                observation = None
            after_hash = text_hash(canonical_json(state)) if delta else before_hash
            rows.append(
                {
                    "step_id": f"{tid}#{i}",
                    "trajectory_id": tid,
                    "source": "synth",
                    "env_id": env,
                    "task_id": f"task{t:07d}",
                    "step_index": i,
                    "turn": 0,
                    "tool": f"{rng.choice(['get', 'update', 'create', 'cancel', 'list', 'assign'])}"
                    f"_{rng.choice(TABLES)}",
                    "arguments_json": canonical_json(args),
                    "args_count": len(args),
                    "raw_observation": raw,
                    "observation_json": observation,
                    "observation_truncated": False,
                    "outcome": "error" if error else "failure" if failure else "success",
                    "error_type": "KeyError" if error else None,
                    "error_message": "missing record" if error else None,
                    "delta": delta,
                    "delta_size": len(delta),
                    "state_before_hash": before_hash,
                    "state_after_hash": after_hash,
                    "code_ref": None,
                    "env_output": None,
                }
            )
            before_hash = after_hash
            made += 1
            if len(rows) >= part_steps:
                pq.write_table(
                    pa.Table.from_pylist(rows, schema=schema.STEPS),
                    layout.steps_dir / f"part-synth{part:05d}.parquet",
                    compression="zstd",
                )
                rows, part = [], part + 1
        if len(trajs) >= 1000:
            traj_writer.write_table(pa.Table.from_pylist(trajs, schema=schema.TRAJECTORIES))
            trajs = []
    if rows:
        pq.write_table(
            pa.Table.from_pylist(rows, schema=schema.STEPS),
            layout.steps_dir / f"part-synth{part:05d}.parquet",
            compression="zstd",
        )
    if trajs:
        traj_writer.write_table(pa.Table.from_pylist(trajs, schema=schema.TRAJECTORIES))
    traj_writer.close()
    return layout


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--envs", type=int, default=200)
    parser.add_argument("--state-kb", type=int, nargs=2, default=(2, 20))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    t0 = time.perf_counter()
    generate(args.out, args.steps, args.envs, tuple(args.state_kb), args.seed)
    print(f"wrote {args.steps} steps to {args.out} in {time.perf_counter() - t0:.1f}s")


if __name__ == "__main__":
    main()
