"""Deterministic synthetic corpus in the pipeline's own labeled-step format (trajectories table +
step parts), for scale benchmarks.

    python benchmarks/synth_corpus.py OUT_DIR --steps 100000 [--envs 200] [--state-kb 2 20] [--seed 0]

States are flat field tables of 2–20 KB; each step changes |Δ| fields (mix: ~45% 0, 25% 1–2, 20% 3–6,
8% 7–12, 2% beyond) with ~20% failures at |Δ| = 0; hashes and Δs are real, so states can be rebuilt and
verified like those of a real run.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.state.canonical import canonical_json, state_hash  # noqa: E402
from pipeline.store import schema  # noqa: E402
from pipeline.store.layout import DataLayout  # noqa: E402

STEPS_PER_TRAJECTORY = 10
DELTA_MIX = [(0, 45), (1, 15), (2, 10), (3, 6), (4, 5), (5, 5), (6, 4), (7, 2), (8, 2), (9, 1), (10, 1), (11, 1), (12, 1), (15, 2)]


def generate(out: Path, steps: int, envs: int = 200, state_kb: tuple[int, int] = (2, 20), seed: int = 0,
             part_steps: int = 50_000) -> DataLayout:
    layout = DataLayout.at(out)
    layout.steps_dir.mkdir(parents=True, exist_ok=True)
    layout.trajectories_dir.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    sizes, weights = zip(*DELTA_MIX)
    traj_writer = pq.ParquetWriter(layout.trajectories, schema.TRAJECTORIES, compression="zstd")
    rows, trajs, part = [], [], 0
    n_traj = (steps + STEPS_PER_TRAJECTORY - 1) // STEPS_PER_TRAJECTORY
    made = 0
    for t in range(n_traj):
        env = f"synth/env{t % envs:04d}"
        n_fields = rng.randint(state_kb[0], state_kb[1]) * 1024 // 64
        state = {f"f{i:04d}": f"{rng.getrandbits(160):040x}{i:020d}" for i in range(n_fields)}
        tid = f"{env}/task{t:07d}/synth"
        trajs.append({"trajectory_id": tid, "source": "synth", "env_id": env, "task_id": f"task{t:07d}",
                      "category": "synth", "strategy": "synthetic", "fingerprint": f"{seed}-{t}", "env_options_json": "{}",
                      "init_config_json": "{}", "initial_state_json": canonical_json(state),
                      "initial_state_hash": state_hash(state), "num_actions": 0, "actions": [], "messages_json": None})
        before_hash = trajs[-1]["initial_state_hash"]
        for i in range(min(STEPS_PER_TRAJECTORY, steps - made)):
            k = rng.choices(sizes, weights)[0]
            failure = k == 0 and rng.random() < 0.45
            keys = rng.sample(sorted(state), min(k, len(state)))
            delta = []
            for key in keys:
                new = f"{rng.getrandbits(160):040x}{i:020d}"
                delta.append({"op": "replace", "path": [key], "before": json.dumps(state[key]), "after": json.dumps(new)})
                state[key] = new
            after_hash = state_hash(state) if keys else before_hash
            args = rng.randint(0, 4)
            rows.append({
                "step_id": f"{tid}#{i}", "trajectory_id": tid, "source": "synth", "env_id": env, "task_id": f"task{t:07d}",
                "step_index": i, "turn": 0, "tool": f"tool{rng.randint(0, 14)}",
                "arguments_json": json.dumps({f"a{j}": rng.randint(0, 9) for j in range(args)}), "args_count": args,
                "raw_observation": "{'success': False, 'error': 'rule'}" if failure else "{'success': True}",
                "observation_json": '{"error":"rule","success":false}' if failure else '{"success":true}',
                "observation_truncated": False, "outcome": "failure" if failure else "success",
                "error_type": None, "error_message": None, "delta": delta, "delta_size": len(delta),
                "state_before_hash": before_hash, "state_after_hash": after_hash, "code_ref": None,
                "call_seconds": 0.0, "env_output": None,
            })
            before_hash = after_hash
            made += 1
            if len(rows) >= part_steps:
                pq.write_table(pa.Table.from_pylist(rows, schema=schema.STEPS), layout.steps_dir / f"part-synth{part:05d}.parquet")
                rows, part = [], part + 1
        if len(trajs) >= 2000:
            traj_writer.write_table(pa.Table.from_pylist(trajs, schema=schema.TRAJECTORIES))
            trajs = []
    if rows:
        pq.write_table(pa.Table.from_pylist(rows, schema=schema.STEPS), layout.steps_dir / f"part-synth{part:05d}.parquet")
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
