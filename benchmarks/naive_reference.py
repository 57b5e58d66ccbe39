"""A baseline written the way the reference construction scripts work: whole-file JSON loads, every
step stored with two full states (indent=2), per-step deep copies, Python lists for everything.
Used only by bench_scale.py to measure the pipeline against it on the same machine."""

from __future__ import annotations

import copy
import json
import random
import sys
from pathlib import Path

import pyarrow.parquet as pq


def to_reference_format(layout_root: Path, out: Path) -> None:
    """The synthetic corpus as the reference scripts' input: one JSON list, full s_t and s'_t per step."""
    trajs = {r["trajectory_id"]: json.loads(r["initial_state_json"]) for r in
             pq.read_table(layout_root / "trajectories" / "trajectories.parquet", columns=["trajectory_id", "initial_state_json"]).to_pylist()}
    records = []
    for part in sorted((layout_root / "steps").glob("part-*.parquet")):
        for s in pq.read_table(part).to_pylist():
            before = trajs[s["trajectory_id"]]
            after = copy.deepcopy(before)
            for d in s["delta"]:
                after[d["path"][0]] = json.loads(d["after"])
            trajs[s["trajectory_id"]] = after
            records.append({"task_id": s["task_id"], "env_id": s["env_id"], "step_id": s["step_id"],
                            "action": {"name": s["tool"], "arguments": json.loads(s["arguments_json"])},
                            "observation": s["raw_observation"], "state_before": before, "state_after": after})
    out.write_text(json.dumps(records, indent=2))


def _diff(a, b, path=""):
    if isinstance(a, dict) and isinstance(b, dict):
        changes = []
        for k in set(a) | set(b):
            if k not in a or k not in b:
                changes.append(path + "." + k)
            else:
                changes += _diff(a[k], b[k], path + "." + k)
        return changes
    return [] if a == b else [path]


def stratify(src: Path, out: Path) -> None:
    steps = json.loads(src.read_text())
    for s in steps:
        before, after = copy.deepcopy(s["state_before"]), copy.deepcopy(s["state_after"])
        n = len(_diff(before, after))
        s["delta_size"] = n
        s["outcome"] = "failure" if "'success': False" in s["observation"] else "success"
        s["args"] = len(s["action"]["arguments"])
    out.write_text(json.dumps(steps, indent=2))


CELLS = [("failure", lambda s: s["outcome"] == "failure" and s["delta_size"] == 0, 20),
         ("nc0", lambda s: s["outcome"] == "success" and s["delta_size"] == 0 and s["args"] == 0, 40),
         ("nc1", lambda s: s["outcome"] == "success" and s["delta_size"] == 0 and s["args"] == 1, 40)] + \
        [(f"d{k}", (lambda k: lambda s: s["outcome"] == "success" and s["delta_size"] == k)(k), 25 if k < 3 else 50) for k in range(1, 7)] + \
        [("difficult", lambda s: s["outcome"] == "success" and 7 <= s["delta_size"] <= 12, 50)]


def select(src: Path, out: Path) -> None:
    steps = json.loads(src.read_text())
    rng = random.Random(0)
    picked = []
    for _, rule, n in CELLS:
        cands = [copy.deepcopy(s) for s in steps if rule(s)]
        rng.shuffle(cands)
        picked += cands[:n]
    out.write_text(json.dumps(picked, indent=2))


def mixture(src: Path, bench: Path, out: Path) -> None:
    steps = json.loads(src.read_text())
    banned = {s["task_id"] for s in json.loads(bench.read_text())}
    groups = {"failure": [], "no_change": [], "simple": [], "complex": []}
    for s in steps:
        if s["task_id"] in banned:
            continue
        g = "failure" if s["outcome"] == "failure" else "no_change" if s["delta_size"] == 0 else "simple" if s["delta_size"] <= 2 else "complex"
        groups[g].append(copy.deepcopy(s))
    sizes = {"failure": 1000, "no_change": 1000, "simple": 2000, "complex": 2230}
    out.write_text(json.dumps([s for g, n in sizes.items() for s in groups[g][:n]], indent=2))


def export(src: Path, out: Path) -> None:
    import pandas as pd

    rows = json.loads(src.read_text())
    pd.DataFrame([{**r, "state_before": json.dumps(r["state_before"]), "state_after": json.dumps(r["state_after"]),
                   "action": json.dumps(r["action"])} for r in rows]).to_parquet(out)


if __name__ == "__main__":
    stage, *paths = sys.argv[1:]
    fn = {"convert": to_reference_format, "stratify": stratify, "select": select, "mixture": mixture, "export": export}[stage]
    fn(*map(Path, paths))
