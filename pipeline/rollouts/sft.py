"""Simia-style agent SFT data from simulated rollouts, in the Hugging Face layout.

Each record is one rollout as an OpenAI conversation: system, the task's user turn(s) as its agent was asked
them, assistant messages with ``tool_calls`` and ``tool`` messages carrying the *simulator's* feedback, plus
the tool schemas the agent was given (``tools``, JSON: :func:`pipeline.envs.registry.tool_schemas`, recorded
with the rollout). A rollout whose task's question is not known (a recorded trajectory of a task no configured
source has) has no user turn and is not exported; the card counts it. Filters:

* ``all`` — every rollout as simulated (Simia as published); a rollout that stopped keeps the steps
  before the stop;
* ``verified`` — only rollouts the executor confirms end to end: finished, every step parsed, every
  feedback equal to the real observation and the simulated state equal to the real one after every step;
* ``prefix`` — every rollout cut before its first unverified step (feedback mismatch or state drift); a
  rollout with no verified step is dropped.

The card states the filter and how many rollouts (and steps) were dropped.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa

from pipeline.export.hf_layout import ShardWriter, card_front, card_text, data_config, files_bytes, plan_shards, staged
from pipeline.report.tables import Facts, md_records
from pipeline.rollouts.loop import DONE, STEP_LIMIT
from pipeline.store.duck import connect

FILTERS = ("all", "verified", "prefix")
MARKER = ".envsim-rollouts.json"
SPLIT = "train"

CALL = pa.struct(
    [
        ("id", pa.string()),
        ("type", pa.string()),
        ("function", pa.struct([("name", pa.string()), ("arguments", pa.string())])),
    ]
)
MESSAGE = pa.struct(
    [("role", pa.string()), ("content", pa.string()), ("tool_calls", pa.list_(CALL)), ("tool_call_id", pa.string())]
)
RECORDS = pa.schema(
    [
        ("rollout_id", pa.string()),
        ("simulator", pa.string()),
        ("agent", pa.string()),
        ("task_id", pa.string()),
        ("env_id", pa.string()),
        ("steps", pa.int32()),
        ("verified", pa.bool_()),
        ("tools", pa.string()),
        ("messages", pa.list_(MESSAGE)),
    ]
)


class StaleRollouts(ValueError):
    """Rollout files written before rollouts recorded their tool schemas and user turns."""


def cut_messages(messages: list[dict[str, Any]], steps: int) -> list[dict[str, Any]]:
    """The conversation up to (not including) the assistant message that issued tool call number
    ``steps``; a trailing assistant message whose calls got no response is dropped too."""
    out: list[dict[str, Any]] = []
    seen = 0
    for message in messages:
        calls = message.get("tool_calls") or []
        if message["role"] == "assistant" and calls:
            if seen + len(calls) > steps:
                break
            seen += len(calls)
        out.append(message)
    answered = {m.get("tool_call_id") for m in out if m["role"] == "tool"}
    while (
        out and out[-1]["role"] == "assistant" and any(c["id"] not in answered for c in out[-1].get("tool_calls") or [])
    ):
        out.pop()
    return out


def _record(row: dict[str, Any], messages: list[dict[str, Any]], steps: int) -> dict[str, Any]:
    """One SFT record: the conversation kept and the tool schemas the agent was given (the rollout's own)."""
    norm = [
        {
            "role": m["role"],
            "content": m.get("content"),
            "tool_calls": m.get("tool_calls") or None,
            "tool_call_id": m.get("tool_call_id"),
        }
        for m in messages
    ]
    return {
        **{k: row[k] for k in ("rollout_id", "simulator", "agent", "task_id", "env_id")},
        "steps": steps,
        "verified": _verified(row),
        "tools": row["tools_json"],
        "messages": norm,
    }


def _verified(row: dict[str, Any]) -> bool:
    return row["status"] in (DONE, STEP_LIMIT) and row["steps"] > 0 and row["verified_steps"] == row["steps"]


def select_records(rollouts: list[dict[str, Any]], how: str) -> tuple[list[dict[str, Any]], int, int]:
    """Records of ``rollouts`` under filter ``how``; returns (records, steps dropped, rollouts dropped for
    having no user turn). Raises :class:`StaleRollouts` for rollouts without recorded tool schemas."""
    if how not in FILTERS:
        raise ValueError(f"unknown rollout filter {how!r}; one of {FILTERS}")
    stale = sorted({row["run_id"] for row in rollouts if not row.get("tools_json")})
    if stale:
        raise StaleRollouts(
            f"the rollouts of {', '.join(stale)} were written before rollouts recorded their tool schemas "
            "and user turns; materialize 'simulated_rollouts' again (finished model requests are replayed "
            "from its request log, nothing is asked twice)"
        )
    records, dropped_steps, without_question = [], 0, 0
    for row in rollouts:
        messages = json.loads(row["messages_json"])
        if not any(m["role"] == "user" for m in messages):  # an SFT record needs the question the agent was asked
            without_question += 1
            dropped_steps += row["steps"]
            continue
        if how == "all":  # a stopped step's unanswered call is cut by cut_messages
            keep = row["steps"]
        elif how == "verified":
            keep = row["steps"] if _verified(row) else 0
        else:
            keep = row["verified_steps"]
        cut = cut_messages(messages, keep)
        kept_calls = sum(len(m.get("tool_calls") or []) for m in cut if m["role"] == "assistant")
        dropped_steps += row["steps"] - min(kept_calls, row["steps"])
        if kept_calls == 0:
            continue
        records.append(_record(row, cut, min(kept_calls, row["steps"])))
    return records, dropped_steps, without_question


def export_rollouts(
    rollout_files: list[Path],
    directory: Path,
    how: str = "prefix",
    name: str = "envsim",
    license: str = "apache-2.0",
    max_shard_bytes: int = 256 * 2**20,
) -> Facts:
    """Write the rollouts of ``rollout_files`` (``rollouts.parquet`` of runs) as agent SFT data in the
    Hugging Face layout at ``directory`` (``data/train-NNNNN-of-NNNNN.parquet`` shards of at most about
    ``max_shard_bytes`` + ``README.md``), with the export's shard writer, card and staged swap; its facts: the
    filter, rollouts kept and dropped (``without_question``: of the dropped, those whose task's question is not
    known), steps kept and dropped, and the export's directory."""
    rows: list[dict[str, Any]] = []
    if rollout_files:
        with connect() as con:
            rows = (
                con.sql(
                    f"SELECT * FROM read_parquet({[str(f) for f in rollout_files]!r}, union_by_name = true) "
                    "ORDER BY rollout_id"
                )
                .to_arrow_table()
                .to_pylist()
            )
    records, dropped_steps, without_question = select_records(rows, how)
    table = pa.Table.from_pylist(records, schema=RECORDS)
    if directory.exists() and any(directory.iterdir()) and not (directory / MARKER).exists():
        raise FileExistsError(f"{directory} is not empty and holds no rollout export; choose another directory")
    report = Facts(
        {
            "filter": how,
            "rollouts": len(rows),
            "kept": len(records),
            "dropped": len(rows) - len(records),
            "without_question": without_question,
            "steps_kept": sum(r["steps"] for r in records),
            "steps_dropped": dropped_steps,
            "path": directory.resolve(),
        }
    )
    with staged(directory) as staging:
        writer = ShardWriter(
            staging / "data",
            SPLIT,
            RECORDS,
            *plan_shards(table.num_rows, table.nbytes, max_shard_bytes),
            row_group_size=None,
        )
        writer.write(table)
        names = writer.close()
        card = rollout_card(report, rows, records, name, license, files_bytes(staging / "data", names))
        (staging / "README.md").write_text(card)
        (staging / MARKER).write_text(json.dumps({"filter": how, "rollouts": len(records)}))
    return report


def rollout_card(
    report: Facts,
    rows: list[dict[str, Any]],
    records: list[dict[str, Any]],
    name: str,
    license: str,
    num_bytes: int = 0,
) -> str:
    front = card_front(
        license,
        f"{name} simulated rollouts ({report['filter']})",
        ["agents", "tool-use", "simulated-environment", "simia"],
        len(records),
        [data_config(SPLIT)],
        RECORDS,
        SPLIT,
        num_bytes,
    )
    runs: dict[tuple[str, str], dict[str, int]] = {}
    kept = {r["rollout_id"] for r in records}
    for row in rows:
        c = runs.setdefault((row["simulator"], row["agent"]), {"rollouts": 0, "kept": 0, "verified": 0})
        c["rollouts"] += 1
        c["kept"] += row["rollout_id"] in kept
        c["verified"] += _verified(row)
    table = md_records(
        [{"simulator": s, "agent": a, **c, "dropped": c["rollouts"] - c["kept"]} for (s, a), c in sorted(runs.items())],
        ["simulator", "agent", "rollouts", "kept", "dropped", "verified"],
        limit=len(runs) or 1,
    )
    rule = {
        "all": "every rollout as simulated (Simia as published); a "
        "rollout that stopped keeps the steps before the stop",
        "verified": "only rollouts the executor verified end to end (every feedback and every simulated state "
        "equal to the real ones)",
        "prefix": "every rollout cut before its first step whose feedback or state the executor contradicts",
    }[report["filter"]]
    body = f"""
# {name}: simulated agent rollouts (filter `{report["filter"]}`)

Agent trajectories played against an LLM **simulator** of the environment (Simia-style): each record is an
OpenAI conversation — the task's user turn(s) as the agent was asked them, its tool calls, and `tool` messages
that are the simulator's feedback; `tools` holds the tool schemas the agent was given (JSON).
The executor shadowed every action on the real environment, so every step is known to be right or wrong.

**Filter `{report["filter"]}`**: {rule}.
Kept **{report["kept"]}** of **{report["rollouts"]}** rollouts (**{report["dropped"]} dropped**, of which
{report["without_question"]} because their task's question is not known); {report["steps_kept"]} steps kept,
{report["steps_dropped"]} steps dropped.

{table}
"""
    return card_text(front, body)
