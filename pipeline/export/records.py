"""SFT records in the formats trainers read: chat messages, Alpaca, and LLaMA-Factory's
``dataset_info.json`` entries — all built from :mod:`pipeline.export.protocol`."""

from __future__ import annotations

from typing import Any

from pipeline.export.protocol import SYSTEM_PROMPT, answer, messages


def chat_record(sample: dict[str, Any]) -> dict[str, Any]:
    return {
        "step_id": sample["step_id"],
        "stratum": sample["stratum"],
        "messages": [*messages(sample), {"role": "assistant", "content": answer(sample)}],
    }


def alpaca_record(sample: dict[str, Any]) -> dict[str, Any]:
    prompt = messages(sample)
    return {
        "step_id": sample["step_id"],
        "stratum": sample["stratum"],
        "instruction": SYSTEM_PROMPT,
        "input": prompt[1]["content"],
        "output": answer(sample),
    }


def llamafactory_dataset_info(name: str, chat_dir: str, alpaca_dir: str) -> dict[str, Any]:
    """Entries for LLaMA-Factory's ``dataset_info.json`` (paths relative to the export directory)."""
    return {
        f"{name}_chat": {
            "file_name": chat_dir,
            "formatting": "sharegpt",
            "columns": {"messages": "messages"},
            "tags": {"role_tag": "role", "content_tag": "content", "user_tag": "user",
                     "assistant_tag": "assistant", "system_tag": "system"},
        },
        f"{name}_alpaca": {
            "file_name": alpaca_dir,
            "formatting": "alpaca",
            "columns": {"prompt": "instruction", "query": "input", "response": "output"},
        },
    }
