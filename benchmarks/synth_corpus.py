"""Deterministic synthetic corpus in the pipeline's own labeled-step format (trajectories table +
step parts), for scale benchmarks.

    python benchmarks/synth_corpus.py OUT_DIR --steps 100000 [--envs 200] [--state-kb 2 20] [--seed 0]
        [--per-env 25] [--workers N]

States look like the ones EnvScaler-style environments have: a few entity tables (``orders``,
``customers``, …) of records with mixed field types (strings, ints, floats, bools, tag lists),
plus settings and counters, 2–20 KB of canonical JSON each. Each trajectory has 10 steps; a step
changes |Δ| entries (mix: ~45% 0, 25% 1–2, 20% 3–6, 8% 7–12, 2% beyond) — mostly field updates
at nested paths, some records added or removed; ~20% of the steps are failures at |Δ| = 0 and
~2% errors. Hashes and Δs are real (the generator applies every Δ and hashes the canonical
state), so states can be rebuilt and verified like those of a real run.

Fast at any size: every environment has ``--per-env`` template trajectories (initial state + 10 labeled steps),
each from its own seeded generator, made once by every CPU. Trajectory ``t`` belongs to environment
``t * envs // trajectories`` (contiguous blocks); its environment's first ``per_env`` trajectories are the
templates, later ones repeat one of them (a seeded hash of ``t``) under their own trajectory, task and step ids.
Parts of :data:`PART_TRAJECTORIES` trajectories are assembled from the templates by Arrow ``take`` and written
by one process per CPU (``steps/part-synthNNNNN.parquet`` + ``trajectories/part-synthNNNNN.parquet``); the
bytes depend on the arguments only, never on the number of processes. So the corpus holds at most
``envs * per_env`` distinct trajectories (5,000 by default; at ~10 states each, ~50,000 distinct (s_t, a_t)).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.core.canonical import canonical_json, text_hash
from pipeline.store import schema
from pipeline.store.layout import DataLayout
from pipeline.store.parquet_io import atomic_path

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


def _template(seed: int, env: int, k: int, state_kb: tuple[int, int]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Template ``k`` of environment ``env``: one trajectory's initial state and its 10 steps (Δs applied, states
    hashed), ids left to the corpus rows that repeat it. Its own seeded generator, so templates can be made in any
    order and in parallel."""
    rng = random.Random(f"synth:{seed}:{env}:{k}")
    sizes, weights = zip(*DELTA_MIX)
    state, next_id = _initial_state(rng, rng.randint(state_kb[0] * 1024, state_kb[1] * 1024))
    text = canonical_json(state)
    traj = {"initial_state_json": text, "initial_state_hash": text_hash(text)}
    before_hash = traj["initial_state_hash"]
    rows: list[dict[str, Any]] = []
    for i in range(STEPS_PER_TRAJECTORY):
        k_delta = rng.choices(sizes, weights)[0]
        roll = rng.random()
        error, failure = k_delta == 0 and roll < 0.04, k_delta == 0 and 0.04 <= roll < 0.48
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
            delta, next_id = _make_delta(rng, state, k_delta, next_id)
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
                "step_id": "",
                "trajectory_id": "",
                "source": "synth",
                "env_id": "",
                "task_id": "",
                "step_index": i,
                "turn": 0,
                "tool": f"{rng.choice(['get', 'update', 'create', 'cancel', 'list', 'assign'])}_{rng.choice(TABLES)}",
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
    return traj, rows


def _make_templates(args: tuple[int, list[tuple[int, int]], tuple[int, int]]) -> tuple[pa.Table, pa.Table]:
    """The templates ``(env, k)`` of one chunk: a trajectories table (states, hashes) and a steps table (10 rows
    each, ids empty)."""
    seed, keys, state_kb = args
    trajs, steps = [], []
    for env, k in keys:
        traj, rows = _template(seed, env, k, state_kb)
        trajs.append(traj)
        steps += rows
    return (
        pa.Table.from_pylist(trajs, schema=pa.schema([schema.TRAJECTORIES.field(n) for n in trajs[0]])),
        pa.Table.from_pylist(steps, schema=schema.STEPS),
    )


@dataclass(frozen=True)
class Plan:
    """Which trajectory repeats which template, computable for any range of trajectories on its own (parts are
    written in parallel, in any order, with identical bytes).

    Trajectory ``t`` of ``trajectories`` belongs to environment ``t * envs // trajectories`` (contiguous blocks, as
    a collection writes them: environment after environment); the first ``per_env`` trajectories of an environment
    each have their own template, later ones repeat one of them, chosen by a seeded hash of ``t``."""

    seed: int
    steps: int
    envs: int
    per_env: int  # templates (distinct trajectories) per environment

    @property
    def trajectories(self) -> int:
        return -(-self.steps // STEPS_PER_TRAJECTORY)

    @property
    def used_envs(self) -> int:
        return min(self.envs, self.trajectories)

    @property
    def templates_per_env(self) -> int:
        return min(self.per_env, -(-self.trajectories // self.used_envs))

    def template_keys(self) -> list[tuple[int, int]]:
        return [(e, k) for e in range(self.used_envs) for k in range(self.templates_per_env)]

    def env_of(self, t: np.ndarray) -> np.ndarray:
        return t * self.used_envs // self.trajectories

    def template_of(self, t: np.ndarray) -> np.ndarray:
        """Row of the template table (``env * templates_per_env + k``) each trajectory of ``t`` repeats."""
        env = self.env_of(t)
        start = -(-(env * self.trajectories) // self.used_envs)  # first trajectory of the environment
        position = t - start
        mixed = _mix64(np.uint64(self.seed) * np.uint64(0x9E3779B97F4A7C15) + t.astype(np.uint64))
        k = np.where(position < self.templates_per_env, position, (mixed % np.uint64(self.templates_per_env)))
        return env * self.templates_per_env + k.astype(np.int64)


def _mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser, element-wise (a seeded hash of each value)."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def _fixed_strings(pieces: list[str | tuple[np.ndarray, int]], n: int) -> pa.Array:
    """``n`` strings of one width built column by column in a byte matrix: literal pieces and zero-padded
    decimal numbers ``(values, width)`` — ``f"synth/env{e:04d}"`` for a whole column without a Python loop."""
    width = sum(len(p) if isinstance(p, str) else p[1] for p in pieces)
    buf = np.empty((n, width), np.uint8)
    col = 0
    for piece in pieces:
        if isinstance(piece, str):
            buf[:, col : col + len(piece)] = np.frombuffer(piece.encode(), np.uint8)
            col += len(piece)
            continue
        values, digits = piece
        if n and int(values.max()) >= 10**digits:
            raise ValueError(f"{int(values.max())} does not fit {digits} digits")
        v = values.astype(np.int64)
        for d in range(digits - 1, -1, -1):
            buf[:, col + d] = 48 + v % 10
            v = v // 10
        col += digits
    offsets = np.arange(0, (n + 1) * width, width, dtype=np.int32)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(buf)])


_TEMPLATES: dict[str, pa.Table] = {}  # a worker's templates, memory-mapped from the IPC files once


def _load_templates(directory: str) -> dict[str, pa.Table]:
    if not _TEMPLATES:
        for name in ("trajectories", "steps"):
            with pa.memory_map(f"{directory}/{name}.arrow") as source:
                _TEMPLATES[name] = pa.ipc.open_file(source).read_all()
    return _TEMPLATES


def _write_part(args: tuple[Plan, str, str, int, int, int]) -> int:
    """Trajectories ``[first, first + count)`` of the plan: ``steps/part-synthNNNNN.parquet`` and
    ``trajectories/part-synthNNNNN.parquet``, assembled from the templates by index (Arrow ``take``)."""
    plan, out, templates_dir, part, first, part_size = args
    templates = _load_templates(templates_dir)
    layout = DataLayout.at(Path(out))
    count = min(plan.trajectories - first, part_size)
    t = np.arange(first, first + count, dtype=np.int64)
    env, template = plan.env_of(t), plan.template_of(t)
    seed_text = f"{plan.seed}-"
    ids = {
        "trajectory_id": _fixed_strings(["synth/env", (env, 4), "/task", (t, 7), "/synth"], count),
        "env_id": _fixed_strings(["synth/env", (env, 4)], count),
        "task_id": _fixed_strings(["task", (t, 7)], count),
    }
    trajs = templates["trajectories"].take(pa.array(template))
    trajs = pa.table(
        {
            **ids,
            "source": pa.array(["synth"] * count, pa.string()),
            "category": pa.array(["synth"] * count, pa.string()),
            "strategy": pa.array(["synthetic"] * count, pa.string()),
            "fingerprint": _fixed_strings([seed_text, (t, 7)], count),
            "env_options_json": pa.array(["{}"] * count, pa.string()),
            "init_config_json": pa.array(["{}"] * count, pa.string()),
            "initial_state_json": trajs.column("initial_state_json"),
            "initial_state_hash": trajs.column("initial_state_hash"),
            "num_actions": pa.array(np.zeros(count, np.int32)),
            "actions": pa.nulls(count, schema.TRAJECTORIES.field("actions").type),
        }
    )
    trajs = trajs.select([n for n in schema.TRAJECTORIES.names if n in trajs.column_names])
    trajs = _conform(trajs, schema.TRAJECTORIES)
    # steps: every trajectory's 10 template rows (the last trajectory may be cut short)
    n_steps = min(plan.steps - first * STEPS_PER_TRAJECTORY, count * STEPS_PER_TRAJECTORY)
    row_traj = np.repeat(np.arange(count, dtype=np.int64), STEPS_PER_TRAJECTORY)[:n_steps]
    step_index = np.tile(np.arange(STEPS_PER_TRAJECTORY, dtype=np.int64), count)[:n_steps]
    rows = templates["steps"].take(pa.array(template[row_traj] * STEPS_PER_TRAJECTORY + step_index))
    st, se = t[row_traj], env[row_traj]
    replaced = {
        "step_id": _fixed_strings(["synth/env", (se, 4), "/task", (st, 7), "/synth#", (step_index, 1)], n_steps),
        "trajectory_id": _fixed_strings(["synth/env", (se, 4), "/task", (st, 7), "/synth"], n_steps),
        "env_id": _fixed_strings(["synth/env", (se, 4)], n_steps),
        "task_id": _fixed_strings(["task", (st, 7)], n_steps),
    }
    for name, column in replaced.items():
        rows = rows.set_column(rows.schema.get_field_index(name), schema.STEPS.field(name), column)
    name = f"part-synth{part:05d}.parquet"
    with atomic_path(layout.steps_dir / name) as tmp:
        pq.write_table(rows, tmp, compression="zstd")
    with atomic_path(layout.trajectories_dir / name) as tmp:
        pq.write_table(trajs, tmp, compression="zstd", row_group_size=TRAJECTORY_ROW_GROUP)
    return n_steps


def _conform(table: pa.Table, target: pa.Schema) -> pa.Table:
    """``table`` with every column of ``target`` (missing ones null) in its order and types."""
    columns = [
        table.column(f.name) if f.name in table.column_names else pa.nulls(table.num_rows, f.type) for f in target
    ]
    return pa.Table.from_arrays(columns, schema=target)


#: trajectories per part (× 10 steps); a part's two files are written by one worker
PART_TRAJECTORIES = 5_000
#: trajectories per row group of the trajectories files (the pipeline reads initial states a row group at a time)
TRAJECTORY_ROW_GROUP = 1_000
#: distinct trajectories (templates) per environment: beyond envs × this, trajectories repeat a template
PER_ENV = 25


def generate(
    out: Path,
    steps: int,
    envs: int = 200,
    state_kb: tuple[int, int] = (2, 20),
    seed: int = 0,
    per_env: int = PER_ENV,
    workers: int | None = None,
) -> DataLayout:
    """Write ``steps`` synthetic labeled steps (and their trajectories) under ``out``; deterministic for the
    arguments (not for ``workers``: any count gives the same bytes)."""
    layout = DataLayout.at(out)
    layout.steps_dir.mkdir(parents=True, exist_ok=True)
    layout.trajectories_dir.mkdir(parents=True, exist_ok=True)
    plan = Plan(seed, steps, envs, per_env)
    workers = workers or os.cpu_count() or 1
    keys = plan.template_keys()
    chunk = max(1, -(-len(keys) // (workers * 8)))
    jobs = [(seed, keys[i : i + chunk], state_kb) for i in range(0, len(keys), chunk)]
    templates_dir = tempfile.mkdtemp(prefix=".synth-templates-", dir=out)
    context = multiprocessing.get_context("spawn")  # not fork: a forked pytest or Dagster process can hold a lock
    with context.Pool(workers) as pool:
        made = pool.map(_make_templates, jobs)
        for i, name in enumerate(("trajectories", "steps")):
            table = pa.concat_tables([m[i] for m in made])
            with pa.OSFile(f"{templates_dir}/{name}.arrow", "wb") as sink, pa.ipc.new_file(sink, table.schema) as w:
                w.write_table(table)
        del made
        parts = [
            (plan, str(out), templates_dir, part, first, PART_TRAJECTORIES)
            for part, first in enumerate(range(0, plan.trajectories, PART_TRAJECTORIES))
        ]
        written = sum(pool.imap_unordered(_write_part, parts))
    shutil.rmtree(templates_dir)
    assert written == steps, (written, steps)
    return layout


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--envs", type=int, default=200)
    parser.add_argument("--state-kb", type=int, nargs=2, default=(2, 20))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--per-env", type=int, default=PER_ENV, help="distinct trajectories (templates) per environment"
    )
    parser.add_argument("--workers", type=int, default=None, help="processes (default: every CPU)")
    args = parser.parse_args()
    t0 = time.perf_counter()
    generate(args.out, args.steps, args.envs, tuple(args.state_kb), args.seed, args.per_env, args.workers)
    seconds = time.perf_counter() - t0
    print(f"wrote {args.steps} steps to {args.out} in {seconds:.1f}s ({args.steps / seconds:,.0f} steps/s)")


if __name__ == "__main__":
    main()
