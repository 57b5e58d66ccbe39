"""A split version as a Hugging Face dataset directory.

``data/<split>-NNNNN-of-NNNNN.parquet`` shards (size-bounded, typed columns: Δ as a list of
structs, states as JSON strings), for the SFT mixture also ``sft/chat`` and ``sft/alpaca`` record
shards plus a LLaMA-Factory ``dataset_info.json``, and a ``README.md`` dataset card whose YAML front
matter (configs, features, license, task categories, size category) is parsed back before it is
written. The export is built in a temporary sibling directory and swapped in at the end, so a
failed export never damages the previous one.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.export.protocol import PROTOCOL_VERSION
from pipeline.export.records import alpaca_record, chat_record, llamafactory_dataset_info
from pipeline.select.versions import BENCHMARK, MIXTURE, SplitStore
from pipeline.store.layout import DataLayout

MARKER = ".envsim-export.json"
SOURCE_LICENSES = {"bfcl": "Apache-2.0 (bfcl-eval, Gorilla project)", "builtin": "Apache-2.0 (envsim-forge builtin pack)"}


class ExportConflict(ValueError):
    """The export directory holds another split version."""


@dataclass
class ExportReport:
    directory: Path
    kind: str
    version: str
    split: str
    rows: int
    files: list[str] = field(default_factory=list)
    card: str = ""


def split_name(kind: str) -> str:
    return "test" if kind == BENCHMARK else "train"


def size_category(n: int) -> str:
    for limit, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")):
        if n < limit:
            return label
    return "1M<n<10M"


def _write_shards(table: pa.Table, directory: Path, split: str, max_bytes: int) -> list[str]:
    directory.mkdir(parents=True, exist_ok=True)
    shards = max(1, math.ceil(table.nbytes / max_bytes))
    per = max(1, math.ceil(table.num_rows / shards)) if table.num_rows else 1
    shards = max(1, math.ceil(table.num_rows / per)) if table.num_rows else 1
    names = []
    for i in range(shards):
        name = f"{split}-{i:05d}-of-{shards:05d}.parquet"
        pq.write_table(table.slice(i * per, per), directory / name, compression="zstd")
        names.append(name)
    return names


def _records(table: pa.Table, build: Callable[[dict[str, Any]], dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist([build(row) for row in table.to_pylist()])


def _licenses(layout: DataLayout, env_ids: list[str]) -> dict[str, str]:
    known: dict[str, str] = {}
    if layout.environments.exists():
        for row in pq.read_table(layout.environments, columns=["env_id", "license"]).to_pylist():
            if row["license"]:
                known[row["env_id"]] = row["license"]
    out = {}
    for env_id in sorted(set(env_ids)):
        prefix = env_id.split("/", 1)[0]
        out[prefix] = known.get(env_id) or SOURCE_LICENSES.get(prefix) or out.get(prefix) or "see the source corpus"
    return out


def export_split(
    layout: DataLayout,
    kind: str,
    version: str | None,
    directory: Path,
    max_shard_bytes: int = 256 * 2**20,
    license: str = "apache-2.0",
    name: str = "envsim",
) -> ExportReport:
    store = SplitStore(layout, kind)
    version = store.resolve(version)
    manifest = store.manifest(version)
    marker = directory / MARKER
    if directory.exists() and any(directory.iterdir()):
        if not marker.exists():
            raise ExportConflict(f"{directory} is not empty and holds no envsim export; choose another directory")
        held = json.loads(marker.read_text())
        if (held.get("kind"), held.get("version")) != (kind, version):
            raise ExportConflict(
                f"{directory} holds {held.get('kind')} version {held.get('version')}; refusing to overwrite it with "
                f"{kind} {version} (export to another directory, or delete it)"
            )
    split = split_name(kind)
    table = pq.read_table(store.samples(version))
    staging = directory.with_name(f".{directory.name}.staging-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        files = [f"data/{n}" for n in _write_shards(table, staging / "data", split, max_shard_bytes)]
        configs = [{"config_name": "default", "data_files": [{"split": split, "path": f"data/{split}-*"}], "default": True}]
        if kind == MIXTURE:
            for fmt, build in (("chat", chat_record), ("alpaca", alpaca_record)):
                files += [f"sft/{fmt}/{n}" for n in _write_shards(_records(table, build), staging / "sft" / fmt, split, max_shard_bytes)]
                configs.append({"config_name": fmt, "data_files": [{"split": split, "path": f"sft/{fmt}/{split}-*"}]})
            (staging / "dataset_info.json").write_text(
                json.dumps(llamafactory_dataset_info(name, "sft/chat", "sft/alpaca"), indent=2))
            files.append("dataset_info.json")
        card = dataset_card(layout, kind, version, manifest, table, configs, license, name)
        (staging / "README.md").write_text(card)
        files.append("README.md")
        (staging / MARKER).write_text(json.dumps({"kind": kind, "version": version, "protocol": PROTOCOL_VERSION}))
        old = directory.with_name(f".{directory.name}.old-{os.getpid()}")
        if directory.exists():
            os.replace(directory, old)
        directory.parent.mkdir(parents=True, exist_ok=True)
        os.replace(staging, directory)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return ExportReport(directory, kind, version, split, table.num_rows, sorted(files), card)


def _features_yaml(schema: pa.Schema, split: str, rows: int) -> dict[str, Any]:
    from datasets import DatasetInfo, Features, SplitDict, SplitInfo

    info = DatasetInfo(features=Features.from_arrow_schema(schema))
    info.splits = SplitDict()
    info.splits.add(SplitInfo(name=split, num_examples=rows))
    return info._to_yaml_dict()


def dataset_card(
    layout: DataLayout, kind: str, version: str, manifest: dict[str, Any], table: pa.Table,
    configs: list[dict[str, Any]], license: str, name: str,
) -> str:
    """The dataset card; its YAML is parsed back with huggingface_hub before it is returned."""
    import yaml
    from huggingface_hub import DatasetCard

    split = split_name(kind)
    rows = table.num_rows
    df = table.select(["stratum", "env_id"]).to_pandas()
    spec = manifest["spec"]
    licenses = _licenses(layout, list(df["env_id"]))
    front = {
        "license": license,
        "pretty_name": f"{name} {kind.replace('_', ' ')} {version}",
        "task_categories": ["text-generation"],
        "tags": ["agents", "tool-use", "environment-simulation", "world-model"],
        "size_categories": [size_category(rows)],
        "configs": configs,
        "dataset_info": _features_yaml(table.schema, split, rows),
    }
    strata = pd.DataFrame(manifest["strata"])
    strata = strata.rename(columns={"stratum": "stratum", "selected": "samples"})[["stratum", "requested", "samples", "environments", "missing"]]
    envs = df.groupby("env_id").size().rename("samples").reset_index().sort_values(["samples", "env_id"], ascending=[False, True])
    provenance = {
        "split version": version, "kind": kind, "seed": spec["seed"], "input fingerprint": spec["input"],
        "protocol": PROTOCOL_VERSION,
    }
    if kind == MIXTURE:
        provenance.update({"benchmark version": spec["benchmark"], "decontaminated by": spec["decontaminate"]})
    load = (f'from datasets import load_dataset\n\nds = load_dataset("<this repo or directory>", split="{split}")'
            + ('\nchat = load_dataset("<this repo or directory>", "chat", split="train")' if kind == MIXTURE else ""))
    body = f"""
# {name}: {'benchmark split' if kind == BENCHMARK else 'Balance2 SFT mixture'} `{version}`

Single-step environment-simulation samples in the EnvSimBench style: given the state `s_t`
(`state_before_json`), an action (`tool`, `arguments_json`) and the tool's source code (`code`), predict the
observation (`raw_observation` / `observation_json`) and the next state `s'_t` (`state_after_json`); `delta` is
the list of changes (`op`, `path` as a list of keys, `before`/`after` as JSON) and `delta_size` = |Δ|.
Every sample was produced by executing real environment code; states are canonical JSON.

## Composition

{strata.to_markdown(index=False)}

Total: **{rows}** samples from **{df['env_id'].nunique()}** environments.

## Environment coverage

{envs.to_markdown(index=False)}

## Provenance

{pd.DataFrame(list(provenance.items()), columns=['field', 'value']).to_markdown(index=False)}

Environment sources and licenses:

{pd.DataFrame(list(licenses.items()), columns=['source', 'license']).to_markdown(index=False)}

## How to load

```python
{load}
```
"""
    if kind == MIXTURE:
        body += """
The `chat` (system / user / assistant messages) and `alpaca` (instruction / input / output) configs are SFT
records built with the same prompt protocol the evaluation harness uses; `dataset_info.json` registers
both with LLaMA-Factory. The assistant answer is `{"feedback", "config_changes"}`; applying the changes to
`s_t` reproduces `s'_t` for every record.
"""
    card_text = "---\n" + yaml.safe_dump(front, sort_keys=False, allow_unicode=True) + "---\n" + body
    parsed = DatasetCard(card_text)  # raises on a card that would not parse
    if parsed.data.to_dict().get("configs") != configs:
        raise ValueError("the generated dataset card does not round-trip its configs")
    return card_text
