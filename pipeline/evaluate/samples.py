"""The samples a simulator is scored on: a split version's rows, each with the whole class source of
its environment (``env_code``, for the ``envsimbench`` prompt template) and, for an imported split, the
state and arguments as published (``published_state_json`` / ``published_arguments_json``, in the file's
key order: the ``envsimbench`` prompt shows them byte for byte as the reference does)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from pipeline.envsimbench.export import env_codes, published_texts
from pipeline.store.layout import DataLayout
from pipeline.store.versions import BENCHMARK, SplitStore


def load_samples(
    layout: DataLayout, version: str | None = None, kind: str = BENCHMARK, max_samples: int | None = None
) -> tuple[str, list[dict[str, Any]]]:
    """``(resolved version, samples)`` of a split version (default: CURRENT), in storage order; with
    ``max_samples``, N taken across the strata: every stratum's first sample in the split's pick order
    (``position``), then every stratum's second, and so on — so a small N still compares every stratum."""
    store = SplitStore(layout, kind)
    version = store.resolve(version)
    frame = pd.read_parquet(store.samples(version))
    if max_samples is not None:
        frame = frame.sort_values("position")
        frame = frame.assign(_round=frame.groupby("stratum").cumcount()).sort_values(["_round", "position"])
        frame = frame.head(max_samples).drop(columns="_round")
    samples = with_env_code(layout, frame.to_dict("records"), store.dir(version))
    published = published_texts(store.dir(version))  # an imported split: the texts as published
    for sample in samples:
        if texts := published.get(sample["step_id"]):
            sample["published_state_json"] = texts.get("state_before_json")
            sample["published_arguments_json"] = texts.get("arguments_json")
    return version, samples


def with_env_code(
    layout: DataLayout, samples: list[dict[str, Any]], split_dir: Path | None = None
) -> list[dict[str, Any]]:
    """``samples`` with the whole class source of their environment in ``env_code`` (the ``envsimbench`` prompt
    template shows it; ``split_dir``: an imported split's published code)."""
    codes = env_codes(layout, {s["env_id"] for s in samples}, split_dir)
    for sample in samples:
        sample["env_code"] = codes.get(sample["env_id"])
    return samples
