"""The intermediate checkpoints of a training run as its job sees them, and where a re-run resumes.

A run trains into one directory per checkpoint version (``<data>/checkpoints/.<version>.staging/`` until it is
published). ``envsim_run.json`` there names the run (checkpoint version, mixture version). Each complete
``checkpoint-N`` — the Hugging Face Trainer writes ``trainer_state.json`` last — is recorded once, the moment
a scan sees it, as ``<version>/step-N`` with its lineage (parent version, step, mixture version, loss, epoch)
in ``envsim_steps.jsonl``, and announced on one log line (``STEP_MARK`` + JSON) that the launcher follows into
the orchestrator. A record outlives its directory (``save_total_limit`` rotates old checkpoints away).

Run by the job with the project's Python: ``python -m pipeline.training.steps resume|scan|watch RUN_DIR``.
"""

from __future__ import annotations

import json
import re
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pipeline.core.progress import Log

RUN_FILE = "envsim_run.json"
STEPS_FILE = "envsim_steps.jsonl"
STEP_MARK = "ENVSIM-CHECKPOINT-STEP "
#: what the Trainer writes last into a checkpoint: its presence makes the checkpoint complete
TRAINER_STATE = "trainer_state.json"
WATCH_INTERVAL_S = 10.0
_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")


def start_run(run_dir: Path, checkpoint_version: str, mixture_version: str) -> None:
    """Name the run that trains into ``run_dir`` (what its step records carry)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / RUN_FILE).write_text(
        json.dumps({"checkpoint_version": checkpoint_version, "mixture_version": mixture_version}, sort_keys=True)
    )


def step_version(checkpoint_version: str, step: int) -> str:
    """The version of the intermediate checkpoint at ``step`` of a run."""
    return f"{checkpoint_version}/step-{step}"


def complete_checkpoints(run_dir: Path) -> list[tuple[int, Path]]:
    """``(step, directory)`` of every complete ``checkpoint-N`` in ``run_dir``, by step."""
    if not run_dir.is_dir():
        return []
    found = [
        (int(m.group(1)), p)
        for p in run_dir.iterdir()
        if (m := _CHECKPOINT.match(p.name)) and (p / TRAINER_STATE).is_file()
    ]
    return sorted(found)


def resume_point(run_dir: Path) -> Path | None:
    """The latest complete checkpoint of ``run_dir`` (a save cut short by preemption is skipped), or None."""
    done = complete_checkpoints(run_dir)
    return done[-1][1] if done else None


def read_steps(run_dir: Path) -> list[dict[str, Any]]:
    """The step records of ``run_dir``, by step (one per step)."""
    path = run_dir / STEPS_FILE
    if not path.exists():
        return []
    records = {}
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:  # a line a killed job left half-written: that step is recorded again
            continue
        records[record["step"]] = record
    return [records[s] for s in sorted(records)]


def _record(run: dict[str, Any], step: int, path: Path) -> dict[str, Any]:
    """The lineage of ``checkpoint-<step>`` at ``path`` in ``run``: its version, parent, mixture, the last
    loss logged up to it, its epoch and when it was complete."""
    state_file = path / TRAINER_STATE
    state = json.loads(state_file.read_text())
    logged = [e for e in state.get("log_history", []) if "loss" in e and e.get("step", 0) <= step]
    return {
        "checkpoint_version": step_version(run["checkpoint_version"], step),
        "parent_version": run["checkpoint_version"],
        "mixture_version": run["mixture_version"],
        "step": step,
        "name": path.name,
        "loss": logged[-1]["loss"] if logged else None,
        "epoch": state.get("epoch"),
        "written_at": datetime.fromtimestamp(state_file.stat().st_mtime, UTC).isoformat(),
    }


def scan(run_dir: Path, announce: Log = print) -> list[dict[str, Any]]:
    """Record every complete checkpoint of ``run_dir`` not recorded yet; returns the new records (each also
    announced as a ``STEP_MARK`` line)."""
    run_file = run_dir / RUN_FILE
    if not run_file.exists():
        raise FileNotFoundError(f"{run_file} is missing: the run's directory was not prepared by sft_training")
    run = json.loads(run_file.read_text())
    seen = {r["step"] for r in read_steps(run_dir)}
    new = []
    for step, path in complete_checkpoints(run_dir):
        if step in seen:
            continue
        try:
            record = _record(run, step, path)
        except FileNotFoundError:  # rotated away between the listing and the read
            continue
        with (run_dir / STEPS_FILE).open("a") as fh:
            fh.write(json.dumps(record, sort_keys=True) + "\n")
        announce(STEP_MARK + json.dumps(record, sort_keys=True))
        new.append(record)
    return new


def parse_mark(line: str) -> dict[str, Any] | None:
    """The step record a ``STEP_MARK`` log line carries (None for any other line)."""
    return json.loads(line[len(STEP_MARK) :]) if line.startswith(STEP_MARK) else None


def watch(run_dir: Path, interval_s: float = WATCH_INTERVAL_S) -> None:
    """Scan ``run_dir`` every ``interval_s`` until the process is ended (the job ends it after training)."""
    while True:
        scan(run_dir, lambda line: print(line, flush=True))
        time.sleep(interval_s)


def main(argv: list[str]) -> int:
    """``resume RUN_DIR`` prints ``resume_from_checkpoint=<latest complete checkpoint>`` (nothing without one);
    ``scan RUN_DIR`` records new checkpoints once; ``watch RUN_DIR`` keeps scanning."""
    if len(argv) != 2 or argv[0] not in ("resume", "scan", "watch"):
        print("usage: python -m pipeline.training.steps resume|scan|watch RUN_DIR", file=sys.stderr)
        return 2
    command, run_dir = argv[0], Path(argv[1])
    if command == "resume":
        if (point := resume_point(run_dir)) is not None:
            print(f"resume_from_checkpoint={point}")
    elif command == "scan":
        scan(run_dir)
    else:
        watch(run_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
