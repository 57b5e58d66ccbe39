"""A baseline written the way the EnvSimBench reference construction scripts work: one script per step,
each loading a whole JSON file, deep-copying states, keeping everything in Python lists and writing the
result back as indent=2 JSON with two full states per step. Used only by ``bench_scale.py`` to measure
the pipeline against it on the same machine, on the same synthetic corpus and with the same quotas.

    python benchmarks/naive_reference.py convert CORPUS_DIR input.json     # corpus -> reference input format
    python benchmarks/naive_reference.py STAGE FILES...                    # one reference-style step
"""

from __future__ import annotations

import copy
import json
import random
import sys
from pathlib import Path

import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _load(path: Path):
    with open(path) as f:
        return json.load(f)


def _dump(value, path: Path) -> None:
    with open(path, "w") as f:
        json.dump(value, f, indent=2, ensure_ascii=False)


def to_reference_format(layout_root: Path, out: Path) -> None:
    """The synthetic corpus as the reference scripts' input: one JSON list, full s_t and s'_t per step
    (rebuilt with the pipeline's own replay; not part of the measured stages)."""
    from pipeline.store.reconstruct import replay, stored_steps

    initial = {
        r["trajectory_id"]: r
        for r in pq.read_table(
            layout_root / "trajectories" / "trajectories.parquet",
            columns=["trajectory_id", "initial_state_json", "initial_state_hash"],
        ).to_pylist()
    }
    steps = (
        pq.read_table(layout_root / "steps")
        .sort_by([("trajectory_id", "ascending"), ("step_index", "ascending")])
        .to_pylist()
    )
    by_traj: dict[str, list] = {}
    for s in steps:
        by_traj.setdefault(s["trajectory_id"], []).append(s)
    records = []
    for tid, traj_steps in by_traj.items():
        first = initial[tid]
        for i, before, after, _, _ in replay(
            tid, first["initial_state_json"], first["initial_state_hash"], stored_steps(traj_steps)
        ):
            s = traj_steps[i]
            records.append(
                {
                    "task_id": s["task_id"],
                    "env_id": s["env_id"],
                    "step_id": s["step_id"],
                    "action": {"name": s["tool"], "arguments": json.loads(s["arguments_json"])},
                    "observation": s["raw_observation"],
                    "state_before": before,
                    "state_after": after,
                }
            )
    _dump(records, out)


def _diff(a, b, path=()):
    if isinstance(a, dict) and isinstance(b, dict):
        changes = []
        for k in sorted(set(a) | set(b)):
            if k not in a:
                changes.append(("add", path + (k,), b[k]))
            elif k not in b:
                changes.append(("delete", path + (k,), None))
            else:
                changes += _diff(a[k], b[k], path + (k,))
        return changes
    return [] if a == b else [("modify", path, b)]


def delete_error(src: Path, out: Path) -> None:
    """Reference step "delete_error": drop steps whose observation is an error."""
    steps = _load(src)
    _dump([copy.deepcopy(s) for s in steps if not str(s["observation"]).startswith("Error:")], out)


def label(src: Path, out: Path) -> None:
    """Reference labeling: diff deep copies of both states, count changes, outcome and arguments."""
    steps = _load(src)
    for s in steps:
        before, after = copy.deepcopy(s["state_before"]), copy.deepcopy(s["state_after"])
        s["delta_size"] = len(_diff(before, after))
        s["outcome"] = "failure" if "'success': False" in s["observation"] else "success"
        s["args"] = len(s["action"]["arguments"])
    _dump(steps, out)


CELLS = (
    [
        ("failure", lambda s: s["outcome"] == "failure" and s["delta_size"] == 0, 20),
        ("no_change_args0", lambda s: s["outcome"] == "success" and s["delta_size"] == 0 and s["args"] == 0, 40),
        ("no_change_args1", lambda s: s["outcome"] == "success" and s["delta_size"] == 0 and s["args"] == 1, 40),
    ]
    + [
        (f"delta_{k}", (lambda k: lambda s: s["outcome"] == "success" and s["delta_size"] == k)(k), 25 if k < 3 else 50)
        for k in range(1, 7)
    ]
    + [("difficult", lambda s: s["outcome"] == "success" and 7 <= s["delta_size"] <= 12, 50)]
)


def select(src: Path, out: Path) -> None:
    """Benchmark: per cell, shuffle the candidates and prefer environments not used yet."""
    steps = _load(src)
    rng = random.Random(0)
    picked, used = [], set()
    for _, rule, n in CELLS:
        cands = [copy.deepcopy(s) for s in steps if rule(s)]
        rng.shuffle(cands)
        cands.sort(key=lambda s: s["env_id"] in used)
        for s in cands[:n]:
            used.add(s["env_id"])
            picked.append(s)
    _dump(picked, out)


GROUPS = {"failure": 1000, "no_change": 1000, "simple": 2000, "complex": 2230}


def mixture(src: Path, bench: Path, out: Path) -> None:
    """Balance2: decontaminate by task_id against the benchmark, then fill the four groups."""
    steps = _load(src)
    banned = {s["task_id"] for s in _load(bench)}
    groups = {g: [] for g in GROUPS}
    for s in steps:
        if s["task_id"] in banned or s["delta_size"] > 12:
            continue
        g = (
            "failure"
            if s["outcome"] == "failure"
            else "no_change"
            if s["delta_size"] == 0
            else "simple"
            if s["delta_size"] <= 2
            else "complex"
        )
        groups[g].append(copy.deepcopy(s))
    rng = random.Random(0)
    for g in groups.values():
        rng.shuffle(g)
    _dump([s for g, n in GROUPS.items() for s in groups[g][:n]], out)


def _chat(s) -> list[dict]:
    prompt = (
        f"## Current state\n```json\n{json.dumps(s['state_before'], indent=2)}\n```\n\n"
        f"## Action\nTool: {s['action']['name']}\n"
        f"Arguments:\n```json\n{json.dumps(s['action']['arguments'], indent=2)}\n```"
    )
    changes = [
        {"type": t, "path": list(p), **({} if t == "delete" else {"value": v})}
        for t, p, v in _diff(copy.deepcopy(s["state_before"]), copy.deepcopy(s["state_after"]))
    ]
    return [
        {"role": "user", "content": prompt},
        {"role": "assistant", "content": json.dumps({"feedback": s["observation"], "config_changes": changes})},
    ]


def export(bench: Path, sft: Path, out_dir: Path) -> None:
    """Both splits as Parquet (states as JSON text) and the SFT split as chat and Alpaca records (the pipeline's
    export writes the same artefacts)."""
    import pandas as pd

    out_dir.mkdir(parents=True, exist_ok=True)
    for name, src in (("test", bench), ("train", sft)):
        rows = _load(src)
        pd.DataFrame(
            [
                {
                    **r,
                    "state_before": json.dumps(r["state_before"]),
                    "state_after": json.dumps(r["state_after"]),
                    "action": json.dumps(r["action"]),
                }
                for r in rows
            ]
        ).to_parquet(out_dir / f"{name}.parquet")
        if name == "train":
            chats = [_chat(r) for r in rows]
            pd.DataFrame([{"step_id": r["step_id"], "messages": c} for r, c in zip(rows, chats)]).to_parquet(
                out_dir / "train-chat.parquet"
            )
            pd.DataFrame(
                [
                    {
                        "step_id": r["step_id"],
                        "instruction": "You are an environment simulator.",
                        "input": c[0]["content"],
                        "output": c[1]["content"],
                    }
                    for r, c in zip(rows, chats)
                ]
            ).to_parquet(out_dir / "train-alpaca.parquet")


STAGES = {
    "convert": to_reference_format,
    "delete_error": delete_error,
    "label": label,
    "select": select,
    "mixture": mixture,
    "export": export,
}

if __name__ == "__main__":
    stage, *paths = sys.argv[1:]
    STAGES[stage](*map(Path, paths))
