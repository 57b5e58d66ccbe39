"""SFT records in the formats trainers read: chat messages, Alpaca, and LLaMA-Factory's ``dataset_info.json`` entries —
all built from :mod:`pipeline.core.protocol`, in either prompt template (``envsim``, default; ``envsimbench``, the
reference evaluation prompt, which needs each sample's whole class source in ``env_code``)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from pipeline.core.protocol import DEFAULT_TEMPLATE, SYSTEM_PROMPT, answer, messages, user_prompt

MESSAGE = pa.struct([("role", pa.string()), ("content", pa.string())])
CHAT = pa.schema([("step_id", pa.string()), ("stratum", pa.string()), ("messages", pa.list_(MESSAGE))])
ALPACA = pa.schema([(name, pa.string()) for name in ("step_id", "stratum", "instruction", "input", "output")])
#: the sample columns records are built from (current_time: absent from samples written before it existed, which
#: have no time section)
RECORD_COLUMNS = ["step_id", "stratum", "state_before_json", "tool", "arguments_json", "code", "raw_observation"]
RECORD_COLUMNS += ["delta", "current_time"]


def chat_record(sample: dict[str, Any], template: str = DEFAULT_TEMPLATE) -> dict[str, Any]:
    return {
        "step_id": sample["step_id"],
        "stratum": sample["stratum"],
        "messages": [*messages(sample, template), {"role": "assistant", "content": answer(sample)}],
    }


def alpaca_record(sample: dict[str, Any], template: str = DEFAULT_TEMPLATE) -> dict[str, Any]:
    prompt = messages(sample, template)
    return {
        "step_id": sample["step_id"],
        "stratum": sample["stratum"],
        "instruction": prompt[0]["content"],
        "input": prompt[1]["content"],
        "output": answer(sample),
    }


def record_tables(
    batch: pa.RecordBatch | pa.Table, template: str = DEFAULT_TEMPLATE, env_code: dict[str, str] | None = None
) -> tuple[pa.Table, pa.Table]:
    """Chat and Alpaca tables for a batch of samples (``RECORD_COLUMNS``); each prompt and answer is
    built once and shared by both formats. Row for row equal to :func:`chat_record` / :func:`alpaca_record`.
    ``env_code`` maps env ids to whole class sources (the ``envsimbench`` template needs them)."""
    samples = batch.select([c for c in RECORD_COLUMNS if c in batch.schema.names]).to_pylist()
    answers = [answer(s) for s in samples]
    n = len(samples)
    if template == DEFAULT_TEMPLATE:
        pairs = [
            (
                SYSTEM_PROMPT,
                user_prompt(s["state_before_json"], s["tool"], s["arguments_json"], s["code"], s.get("current_time")),
            )
            for s in samples
        ]
    else:
        ids = batch.column("env_id").to_pylist() if "env_id" in batch.schema.names else [None] * n
        pairs = [
            tuple(m["content"] for m in messages({**s, "env_id": e, "env_code": (env_code or {}).get(e)}, template))
            for s, e in zip(samples, ids)
        ]
    contents = pa.array([text for (sp, p), a in zip(pairs, answers) for text in (sp, p, a)], pa.string())
    roles = pa.array(["system", "user", "assistant"] * n, pa.string())
    chat_messages = pa.ListArray.from_arrays(
        pa.array(range(0, 3 * n + 1, 3), pa.int32()),
        pa.StructArray.from_arrays([roles, contents], fields=list(MESSAGE)),
    )
    ids, strata = batch.column("step_id"), batch.column("stratum")
    chat = pa.Table.from_arrays([ids, strata, chat_messages], schema=CHAT)
    # instruction, input and output: every third content from the system prompt's, the user's and the answer's
    texts = [contents.take(pa.array(range(k, 3 * n, 3))) for k in range(3)]
    alpaca = pa.Table.from_arrays([ids, strata, *texts], schema=ALPACA)
    return chat, alpaca


def llamafactory_dataset_info(name: str, chat_dir: str, alpaca_dir: str) -> dict[str, Any]:
    """Entries for LLaMA-Factory's ``dataset_info.json`` (paths relative to the export directory)."""
    return {
        f"{name}_chat": {
            "file_name": chat_dir,
            "formatting": "sharegpt",
            "columns": {"messages": "messages"},
            "tags": {
                "role_tag": "role",
                "content_tag": "content",
                "user_tag": "user",
                "assistant_tag": "assistant",
                "system_tag": "system",
            },
        },
        f"{name}_alpaca": {
            "file_name": alpaca_dir,
            "formatting": "alpaca",
            "columns": {"prompt": "instruction", "query": "input", "response": "output"},
        },
    }
