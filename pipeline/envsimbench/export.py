"""The published EnvSimBench format, both ways out: reference-format samples of a split (the benchmark
JSON list its evaluation script reads), its Alpaca SFT records (the template of its SFT data) with a
LLaMA-Factory ``dataset_info.json`` entry, and the oracle answer written the way its SFT data teaches.

A reference sample::

    {"task_info": {"task_id", "env_id", "task", "step"},
     "env_code": <whole class source>,
     "step_detail": {"action": {"name", "arguments"}, "observation": {"type", "content"},
                     "config_before", "config_after",
                     "config_change": {"changes": [{"path": "a.b.c", "type": "added"|"removed"|"modified",
                                                    "before", "after"}], "change_count"}}}

``observation.content`` is the observation the agent saw (``str(return value)``); configs are plain JSON
values (big ints as numbers, no canonical markers), keys in our canonical (sorted) order; ``changes`` is
the reference's own diff (dotted paths, Python ``!=``) and ``change_count`` its length. Reading the format
back in is :mod:`pipeline.envsimbench.importer`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from pipeline.core.protocol import plain, tool_call
from pipeline.envsimbench.reference import reference_diff
from pipeline.store.layout import DataLayout

#: the instruction of the reference SFT data (its Alpaca template)
SFT_INSTRUCTION = (
    "You are simulating a task execution environment. Given the environment code, initial configuration, and tool "
    "call, return the exact environment feedback and configuration changes.\n\nEnvironment Code:\n{env_code}\n\n"
    "Execute the tool call strictly and output the standard result."
)
ENV_CODE_FILE = "env_code.parquet"  # an imported split's whole class sources (env_id, env_code)
#: an imported split's published texts (step_id, state_before_json, arguments_json), in the file's key order:
#: what model-facing text shows for it (the canonical forms in the samples are for hashes and Δ)
PUBLISHED_FILE = "published.parquet"


def published_texts(split_dir: Path | None) -> dict[str, dict[str, str]]:
    """``step_id -> {"state_before_json", "arguments_json"}`` of an imported split (empty for others)."""
    if split_dir is None or not (split_dir / PUBLISHED_FILE).exists():
        return {}
    return {
        r["step_id"]: {k: v for k, v in r.items() if k != "step_id" and v is not None}
        for r in pq.read_table(split_dir / PUBLISHED_FILE).to_pylist()
    }


def env_codes(layout: DataLayout, env_ids: Iterable[str], split_dir: Path | None = None) -> dict[str, str]:
    """The whole class source of each environment: an imported split's ``env_code.parquet``, else the
    environment catalog (a bfcl composite ``bfcl/A+B`` is its classes' sources joined)."""
    wanted = set(env_ids)
    found: dict[str, str] = {}
    if split_dir is not None and (split_dir / ENV_CODE_FILE).exists():
        for row in pq.read_table(split_dir / ENV_CODE_FILE).to_pylist():
            if row["env_id"] in wanted:
                found[row["env_id"]] = row["env_code"]
    missing = wanted - set(found)
    if not missing or not layout.environments.exists() or not layout.tool_code.exists():
        return found
    refs = {
        r["env_id"]: r["class_code_ref"]
        for r in pq.read_table(layout.environments, columns=["env_id", "class_code_ref"]).to_pylist()
    }
    needed = set(refs.values())
    code = {
        r["code_ref"]: r["code"]
        for r in pq.read_table(layout.tool_code, columns=["code_ref", "code"]).to_pylist()
        if r["code_ref"] in needed
    }

    def one(env_id: str) -> str | None:
        if refs.get(env_id) in code:
            return code[refs[env_id]]
        source, _, classes = env_id.partition("/")
        if "+" in classes:
            parts = [one(f"{source}/{c}") for c in classes.split("+")]
            return "\n\n".join(parts) if all(parts) else None  # type: ignore[arg-type]
        return None

    return found | {env_id: text for env_id in missing if (text := one(env_id))}


def reference_sample(sample: dict[str, Any], env_code: str | None, task: str = "") -> dict[str, Any]:
    """One of our samples as a reference-format sample."""
    before = plain(json.loads(sample["state_before_json"]))
    after = plain(json.loads(sample["state_after_json"]))
    changes = reference_diff(before, after)
    return {
        "task_info": {
            "task_id": sample["task_id"],
            "env_id": sample["env_id"],
            "task": task,
            "step": int(sample["step_index"]),
        },
        "env_code": env_code or sample.get("code") or "",
        "step_detail": {
            "action": {"name": sample["tool"], "arguments": plain(json.loads(sample["arguments_json"]))},
            "observation": {"type": "tool", "content": sample["raw_observation"]},
            "config_before": before,
            "config_after": after,
            "config_change": {"changes": changes, "change_count": len(changes)},
        },
    }


def reference_answer(sample: dict[str, Any]) -> str:
    """The oracle answer written the way the reference SFT data teaches: the observation string as
    feedback, the reference diff (dotted paths, added / removed / modified, before / after) as changes."""
    before = plain(json.loads(sample["state_before_json"]))
    after = plain(json.loads(sample["state_after_json"]))
    return json.dumps(
        {"feedback": sample["raw_observation"], "config_changes": reference_diff(before, after)},
        ensure_ascii=False,
        indent=2,
    )


def alpaca_record(ref: dict[str, Any]) -> dict[str, str]:
    """A reference-format sample as a record of the reference SFT data (its Alpaca template; the JSON is
    written clean, without the backslash rewriting the reference applied to its text)."""
    detail = ref["step_detail"]
    action = detail["action"]
    call = tool_call(action["name"], json.dumps(action.get("arguments") or {}))
    return {
        "instruction": SFT_INSTRUCTION.format(env_code=ref["env_code"]),
        "input": json.dumps(
            {"initial_config": detail["config_before"], "tool_call": call}, ensure_ascii=False, indent=2
        ),
        "output": json.dumps(
            {"feedback": detail["observation"]["content"], "config_changes": detail["config_change"]["changes"]},
            ensure_ascii=False,
            indent=2,
        ),
    }


def iter_reference_samples(
    layout: DataLayout, samples: Path, split_dir: Path | None = None
) -> Iterator[dict[str, Any]]:
    """The reference-format samples of a split's ``samples.parquet``, in its pick order (``position``)."""
    table = pq.read_table(samples)
    codes = env_codes(layout, set(table.column("env_id").to_pylist()), split_dir)
    for row in sorted(table.to_pylist(), key=lambda r: r["position"]):
        yield reference_sample(row, codes.get(row["env_id"]))


def write_benchmark(layout: DataLayout, samples: Path, out: Path, split_dir: Path | None = None) -> int:
    """The split as the reference benchmark file (a JSON list, indent 2); returns the sample count."""
    out.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with out.open("w", encoding="utf-8") as fh:
        fh.write("[")
        for ref in iter_reference_samples(layout, samples, split_dir):
            fh.write(("," if n else "") + "\n" + json.dumps(ref, ensure_ascii=False, indent=2))
            n += 1
        fh.write("\n]\n" if n else "]\n")
    return n


def write_sft(layout: DataLayout, samples: Path, out: Path, split_dir: Path | None = None) -> int:
    """The split as reference SFT data: Alpaca records, one JSON object a line; returns the count."""
    out.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with out.open("w", encoding="utf-8") as fh:
        for ref in iter_reference_samples(layout, samples, split_dir):
            fh.write(json.dumps(alpaca_record(ref), ensure_ascii=False) + "\n")
            n += 1
    return n


def dataset_info_entry(name: str, file_name: str) -> dict[str, Any]:
    """LLaMA-Factory ``dataset_info.json`` entry for the reference-format Alpaca file."""
    return {
        f"{name}_envsimbench_alpaca": {
            "file_name": file_name,
            "formatting": "alpaca",
            "columns": {"prompt": "instruction", "query": "input", "response": "output"},
        }
    }
