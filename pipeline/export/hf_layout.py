"""A split version as a Hugging Face dataset directory.

``data/<split>-NNNNN-of-NNNNN.parquet`` shards (size-bounded, typed columns: Δ as a list of structs, states as JSON
strings), for the SFT mixture also ``sft/chat`` and ``sft/alpaca`` record shards plus a LLaMA-Factory
``dataset_info.json``, optionally the split in the published EnvSimBench format (``envsimbench/benchmark.json``, for the
mixture also ``envsimbench/sft_alpaca.jsonl`` registered in ``dataset_info.json``), and a ``README.md`` dataset card
whose YAML front matter (configs, features, license, task categories, size category) is parsed back before it is
written. The export is built in a temporary sibling directory and swapped in at the end, so a failed export never
damages the previous one.
"""

from __future__ import annotations

import glob
import json
import math
import os
import re
import shutil
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.core.processes import running
from pipeline.core.protocol import (
    DEFAULT_TEMPLATE,
    PROTOCOL_VERSION,
    SYSTEM_PROMPT,
    TEMPLATES,
    TIME_SECTION,
    USER_TEMPLATE,
)
from pipeline.core.untrusted import card
from pipeline.envs import registry
from pipeline.envsimbench import export as envsimbench
from pipeline.export.records import ALPACA, CHAT, RECORD_COLUMNS, llamafactory_dataset_info, record_tables
from pipeline.report.tables import Facts, Markdown, Table, md_records
from pipeline.store.layout import DataLayout
from pipeline.store.memory import use_returning_pool
from pipeline.store.parquet_io import BackgroundWrites
from pipeline.store.schema import COLUMN_DOCS
from pipeline.store.versions import EmptySelection, SplitStore, split_kind

MARKER = ".envsim-export.json"


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

    def facts(self, unchanged: bool, hub: str) -> Facts:
        """What an export reports (the dataset assets' metadata): version, rows, whether it was there already,
        where it went on the Hub (``hub``), its files and sizes, the card's body and its directory."""
        files = [{"file": f, "bytes": (self.directory / f).stat().st_size} for f in self.files]
        return Facts(
            {
                "version": self.version,
                "rows": self.rows,
                "unchanged": unchanged,
                "hub": hub,
                "files": Table(files, ["file", "bytes"]),
                "card": Markdown(self.card.split("---\n", 2)[2]),
                "path": self.directory.resolve(),
            }
        )


def size_category(n: int) -> str:
    limits = ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"))
    return next((label for limit, label in limits if n < limit), "1M<n<10M")


def plan_shards(rows: int, nbytes: int, max_bytes: int) -> tuple[int, int]:
    """(shards, rows per shard) for ``rows`` rows of ``nbytes`` uncompressed bytes."""
    per = max(1, math.ceil(rows / max(1, math.ceil(nbytes / max_bytes))))
    return max(1, math.ceil(rows / per)), per


def shard_name(split: str, index: int, shards: int) -> str:
    """The file name of shard ``index`` of ``shards`` of a split (the layout ``datasets`` reads)."""
    return f"{split}-{index:05d}-of-{shards:05d}.parquet"


def data_config(split: str, directory: str = "data") -> dict[str, Any]:
    """The card's default config: the split's shards under ``directory``."""
    return {
        "config_name": "default",
        "data_files": [{"split": split, "path": f"{directory}/{split}-*"}],
        "default": True,
    }


class ShardWriter:
    """``<split>-NNNNN-of-NNNNN.parquet`` files of ``per`` rows each (zstd; row groups of
    ``row_group_size`` rows, None: one per table written), written table by table."""

    def __init__(
        self, directory: Path, split: str, schema: pa.Schema, shards: int, per: int, row_group_size: int | None = 256
    ) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory, self.split, self.schema, self.shards, self.per = directory, split, schema, shards, per
        self.row_group_size = row_group_size
        self.names: list[str] = []
        self.writer: pq.ParquetWriter | None = None
        self.left = 0

    def write(self, table: pa.Table) -> None:
        if self.writer is None and not table.num_rows:  # an empty first table is written, as pq.write_table does
            self._next()
            self.writer.write_table(table, row_group_size=self.row_group_size)
        while table.num_rows:
            if self.writer is None or self.left == 0:
                self._next()
            head = table.slice(0, self.left)
            self.writer.write_table(head, row_group_size=self.row_group_size)
            self.left -= head.num_rows
            table = table.slice(head.num_rows)

    def _next(self) -> None:
        if self.writer is not None:
            self.writer.close()
        name = shard_name(self.split, len(self.names), self.shards)
        self.names.append(name)
        self.writer, self.left = pq.ParquetWriter(self.directory / name, self.schema, compression="zstd"), self.per

    def close(self) -> list[str]:
        if self.writer is None:
            self._next()  # an empty split still gets its one (empty) shard
        self.writer.close()
        return self.names


def _column_bytes(meta: pq.FileMetaData, columns: list[str]) -> int:
    index = [i for i in range(meta.num_columns) if meta.schema.column(i).path.split(".")[0] in columns]
    return sum(meta.row_group(rg).column(i).total_uncompressed_size for rg in range(meta.num_row_groups) for i in index)


def _write_data(samples: Path, directory: Path, split: str, max_bytes: int) -> list[str]:
    """The split's samples as shards; a split that fits one shard is the samples file itself, copied."""
    meta = pq.ParquetFile(samples).metadata
    shards, per = plan_shards(
        meta.num_rows, sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups)), max_bytes
    )
    if shards == 1:
        directory.mkdir(parents=True, exist_ok=True)
        name = shard_name(split, 0, 1)
        shutil.copyfile(samples, directory / name)
        return [name]
    writer = ShardWriter(directory, split, pq.read_schema(samples), shards, per)
    for batch in pq.ParquetFile(samples).iter_batches(batch_size=256):
        writer.write(pa.Table.from_batches([batch]))
    return writer.close()


def _write_records(
    samples: Path,
    sft_dir: Path,
    split: str,
    max_bytes: int,
    template: str = DEFAULT_TEMPLATE,
    env_code: dict[str, str] | None = None,
) -> tuple[list[str], list[str]]:
    """Chat and Alpaca SFT records (``sft_dir``'s ``chat/`` and ``alpaca/``) in a prompt template, streamed from the
    samples batch by batch."""
    meta = pq.ParquetFile(samples).metadata
    fixed = (
        len(SYSTEM_PROMPT)
        + len(USER_TEMPLATE)
        + len(TIME_SECTION)
        + 256
        + (max(map(len, (env_code or {"": ""}).values())) if template != DEFAULT_TEMPLATE else 0)
    )
    estimate = (
        _column_bytes(meta, ["state_before_json", "code", "arguments_json", "raw_observation", "delta"])
        * (1 if template == DEFAULT_TEMPLATE else 2)
        + fixed * meta.num_rows
    )
    present = set(pq.read_schema(samples).names)
    columns = [c for c in RECORD_COLUMNS if c in present] + ([] if template == DEFAULT_TEMPLATE else ["env_id"])
    shards, per = plan_shards(meta.num_rows, estimate, max_bytes)
    chat = ShardWriter(sft_dir / "chat", split, CHAT, shards, per)
    alpaca = ShardWriter(sft_dir / "alpaca", split, ALPACA, shards, per)
    # one thread per format compresses while the records of the next batch are built
    with BackgroundWrites() as chat_writes, BackgroundWrites() as alpaca_writes:
        for batch in pq.ParquetFile(samples).iter_batches(batch_size=256, columns=columns):
            chat_table, alpaca_table = record_tables(batch, template, env_code)
            chat_writes.submit(chat.write, chat_table)
            alpaca_writes.submit(alpaca.write, alpaca_table)
    return chat.close(), alpaca.close()


def _licenses(layout: DataLayout, env_ids: list[str]) -> dict[str, str]:
    """The card's license line per env-id namespace: the catalog's license of its environments, else the
    registered source's card license (:func:`pipeline.envs.registry.licenses`), else "see the source corpus"."""
    card_licenses = registry.licenses()
    known: dict[str, str] = {}
    if layout.environments.exists():
        rows = pq.read_table(layout.environments, columns=["env_id", "license"]).to_pylist()
        known = {r["env_id"]: r["license"] for r in rows if r["license"]}
    out = {}
    for env_id in sorted(set(env_ids)):
        prefix = env_id.split("/", 1)[0]
        out[prefix] = known.get(env_id) or card_licenses.get(prefix) or out.get(prefix) or "see the source corpus"
    return out


def export_split(
    layout: DataLayout,
    kind: str,
    version: str | None,
    directory: Path,
    max_shard_bytes: int = 256 * 2**20,
    license: str = "apache-2.0",
    name: str = "envsim",
    prompt: str = DEFAULT_TEMPLATE,
    envsimbench_format: bool = False,
) -> ExportReport:
    """Export a split version to ``directory`` (see the module docstring). ``prompt`` is the template of
    the SFT records; ``envsimbench_format`` adds the split in the published EnvSimBench format."""
    if prompt not in TEMPLATES:
        raise ValueError(f"unknown prompt template {prompt!r}; known: {', '.join(TEMPLATES)}")
    use_returning_pool()
    store = SplitStore(layout, kind)
    version = store.resolve(version)
    manifest = store.manifest(version)
    samples = store.samples(version)
    if not manifest.get("samples") or not (rows := pq.ParquetFile(samples).metadata.num_rows):
        raise EmptySelection(
            f"{kind} version {version} holds no samples, so there is nothing to export "
            f"(spec: {json.dumps(manifest.get('spec', {}), sort_keys=True)[:300]}); "
            "rebuild the selection with more candidates or a narrower decontamination"
        )
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
    split = split_kind(kind).hf_split
    with staged(directory) as staging:
        files = [f"data/{n}" for n in _write_data(samples, staging / "data", split, max_shard_bytes)]
        num_bytes = files_bytes(staging, files)  # the card's dataset_info.splits[].num_bytes
        configs = [data_config(split)]
        split_dir = store.dir(version)
        if envsimbench_format:
            envsimbench.write_benchmark(layout, samples, staging / "envsimbench" / "benchmark.json", split_dir)
            files.append("envsimbench/benchmark.json")
        if split_kind(kind).sft_records:
            codes = (
                envsimbench.env_codes(
                    layout, set(pq.read_table(samples, columns=["env_id"]).column("env_id").to_pylist()), split_dir
                )
                if prompt != DEFAULT_TEMPLATE
                else None
            )
            chat, alpaca = _write_records(samples, staging / "sft", split, max_shard_bytes, prompt, codes)
            files += [f"sft/chat/{n}" for n in chat] + [f"sft/alpaca/{n}" for n in alpaca]
            for fmt in ("chat", "alpaca"):
                configs.append({"config_name": fmt, "data_files": [{"split": split, "path": f"sft/{fmt}/{split}-*"}]})
            info = llamafactory_dataset_info(name, "sft/chat", "sft/alpaca")
            if envsimbench_format:
                envsimbench.write_sft(layout, samples, staging / "envsimbench" / "sft_alpaca.jsonl", split_dir)
                files.append("envsimbench/sft_alpaca.jsonl")
                info.update(envsimbench.dataset_info_entry(name, "envsimbench/sft_alpaca.jsonl"))
            (staging / "dataset_info.json").write_text(json.dumps(info, indent=2))
            files.append("dataset_info.json")
        card = dataset_card(
            layout,
            kind,
            version,
            manifest,
            samples,
            configs,
            license,
            name,
            prompt,
            envsimbench_format,
            num_bytes=num_bytes,
        )
        (staging / "README.md").write_text(card)
        files.append("README.md")
        (staging / MARKER).write_text(
            json.dumps(
                {
                    "kind": kind,
                    "version": version,
                    "protocol": PROTOCOL_VERSION,
                    "prompt": prompt,
                    "envsimbench_format": envsimbench_format,
                    "rows": rows,
                }
            )
        )
    return ExportReport(directory, kind, version, split, rows, sorted(files), card)


@contextmanager
def staged(directory: Path) -> Iterator[Path]:
    """A staging sibling of ``directory`` to build an export in: swapped in place of ``directory`` when the
    block ends without error (the previous export removed only then), removed otherwise — a failed
    export never damages the previous one."""
    staging = directory.with_name(f".{directory.name}.staging-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    _remove_left_behind(directory)
    try:
        yield staging
        old = directory.with_name(f".{directory.name}.old-{os.getpid()}")
        if directory.exists():
            os.replace(directory, old)
        directory.parent.mkdir(parents=True, exist_ok=True)
        os.replace(staging, directory)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _remove_left_behind(directory: Path) -> None:
    """The staging and old siblings of ``directory`` that a killed export left (their process is gone)."""
    for sibling in directory.parent.glob(f".{glob.escape(directory.name)}.*-*"):
        kind, _, pid = sibling.name[len(directory.name) + 2 :].rpartition("-")
        if kind in ("staging", "old") and pid.isdigit() and not running(int(pid)):
            shutil.rmtree(sibling, ignore_errors=True)


def files_bytes(directory: Path, names: list[str]) -> int:
    """The size in bytes of a split's data files (``names`` relative to ``directory``): the card's ``num_bytes``."""
    return sum((directory / n).stat().st_size for n in names)


def card_front(
    license: str,
    pretty_name: str,
    tags: list[str],
    rows: int,
    configs: list[dict[str, Any]],
    schema: pa.Schema,
    split: str,
    num_bytes: int = 0,
) -> dict[str, Any]:
    """A dataset card's YAML front matter (license, name, task category, tags, size category, configs,
    features and split size: rows and the data files' bytes), in the order the Hub writes it."""
    return {
        "license": license,
        "pretty_name": pretty_name,
        "task_categories": ["text-generation"],
        "tags": tags,
        "size_categories": [size_category(rows)],
        "configs": configs,
        "dataset_info": {
            "features": features_yaml(schema),
            "splits": [{"name": split, "num_bytes": num_bytes, "num_examples": rows}],
        },
    }


def card_text(front: dict[str, Any], body: str) -> str:
    """A dataset card: YAML front matter between ``---`` lines, then the Markdown body."""
    import yaml

    return "---\n" + yaml.safe_dump(front, sort_keys=False, allow_unicode=True) + "---\n" + body


def features_yaml(schema: pa.Schema) -> list[dict[str, Any]]:
    """The card's ``dataset_info.features`` for an Arrow schema, in the form ``datasets`` writes
    (``Features.from_arrow_schema(schema)._to_yaml_list()``; a test holds the two equal). Written
    here because importing ``datasets`` costs the export ~60 MiB and ~1 s."""
    return [{"name": f.name, **_feature(f.type)} for f in schema]


#: Arrow type -> the card feature's dtype (``pa.bool_()``: ``bool``)
_DTYPES = {
    getattr(pa, name)(): name.rstrip("_")
    for name in ("string", "large_string", "bool_", "float64", "float32", "int64", "int32", "int16", "int8")
}


def _feature(t: pa.DataType) -> dict[str, Any]:
    if pa.types.is_struct(t):
        return {"struct": [{"name": f.name, **_feature(f.type)} for f in t]}
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        inner = _feature(t.value_type)  # a list of structs or of scalars names them without the wrapping key
        return {"list": inner.get("dtype", inner.get("struct", inner))}
    if t not in _DTYPES:
        raise TypeError(f"no card feature for Arrow type {t}")
    return {"dtype": _DTYPES[t]}


def type_text(t: pa.DataType) -> str:
    """A column type as the Data Fields section writes it (the card feature's dtype; lists and structs spelt out)."""
    if pa.types.is_struct(t):
        return "{" + ", ".join(f"{f.name}: {type_text(f.type)}" for f in t) + "}"
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return f"list of {type_text(t.value_type)}"
    return _feature(t)["dtype"]


def data_fields(schema: pa.Schema) -> str:
    """The card's "Data Fields" section body: one line per column of the data files, its type and meaning
    (``pipeline.store.schema.COLUMN_DOCS``)."""
    return "\n".join(
        f"- `{f.name}` ({type_text(f.type)}{'' if f.nullable else ', never null'})"
        + (f": {doc}" if (doc := COLUMN_DOCS.get(f.name, "")) else "")
        for f in schema
    )


def _limitations(manifest: dict[str, Any], kind: str) -> str:
    short = [s for s in manifest.get("strata", []) if s.get("missing")]
    filled = (
        "Strata filled short of their quota: "
        + "; ".join(f"{card(s['stratum'])} {s['selected']} of {s['requested']} ({s['missing']} missing)" for s in short)
        + "."
        if short
        else "Every stratum of the composition is filled to its quota."
    )
    return f"""- **Synthetic environments.** The environments are Python classes: bfcl-eval's simplified API \
simulations, a
  builtin pack written for this project, and corpora such as EnvScaler whose code is LLM-generated. They are not
  production systems; their rules, error messages and state layouts are whatever the code does.
- **Generated actions.** Trajectories come from ground-truth replay of benchmark tasks, seeded schema-driven
  exploration (with deliberately mutated arguments) and, optionally, an LLM agent, not from real users: the mix of
  tools, arguments and failures is not the distribution of a deployed agent.
- **Frozen clock, seeded randomness.** Every trajectory ran under a deterministic clock (a start in 2025, one minute
  per call, `current_time`) and seeded random / uuid sources, so timestamps and random ids are reproducible, not
  realistic.
- **Single step.** Each sample is one call from a given state; it does not measure how a simulator's errors compound
  over a trajectory (multi-step drift).
- **Composition.** Steps that raised (`error`) are never \
selected{f", {note}" if (note := split_kind(kind).composition_note) else ""};
  bfcl's tools never change more than a few fields, so the large-|Δ| strata come from the builtin pack and corpora
  only, and coverage per environment is uneven (see Environment coverage). {filled}"""


def _citation(name: str, kind: str, version: str) -> str:
    what = split_kind(kind).title
    key = re.sub(r"[^A-Za-z0-9]+", "_", f"{name}_{version}").strip("_")
    title = re.sub(r"[^A-Za-z0-9 ._+-]", "", str(name)) or "envsim"  # inside a code block: plain characters only
    return f"""```bibtex
@misc{{{key},
  title        = {{{{{title}}}: {what} {version}}},
  howpublished = {{Built with envsim-forge, a Dagster pipeline for environment-simulation datasets}},
  note         = {{Split version {version}}}
}}
```

The benchmark's design (single-step simulation, Feedback Match and Config Match, the 400-sample composition)
is EnvSimBench's, "A Benchmark for Evaluating and Improving LLM-Based Environment Simulation"; cite that paper
for it, and the environment sources above for their environments."""


def dataset_card(
    layout: DataLayout,
    kind: str,
    version: str,
    manifest: dict[str, Any],
    samples: Path,
    configs: list[dict[str, Any]],
    license: str,
    name: str,
    prompt: str = DEFAULT_TEMPLATE,
    envsimbench_format: bool = False,
    num_bytes: int = 0,
) -> str:
    """The dataset card; its YAML is parsed back with huggingface_hub before it is returned. ``num_bytes``: the
    size of the split's data files (:func:`files_bytes`)."""
    split = split_kind(kind).hf_split
    env_ids = pq.read_table(samples, columns=["env_id"]).column("env_id").to_pylist()
    rows = len(env_ids)
    licenses = _licenses(layout, env_ids)
    front = card_front(
        license,
        f"{name} {kind.replace('_', ' ')} {version}",
        ["agents", "tool-use", "environment-simulation", "world-model"],
        rows,
        configs,
        pq.read_schema(samples),
        split,
        num_bytes,
    )
    per_env = Counter(env_ids)
    envs = md_records(
        [{"env_id": e, "samples": n} for e, n in sorted(per_env.items(), key=lambda kv: (-kv[1], kv[0]))],
        ["env_id", "samples"],
        limit=len(per_env),
    )
    provenance = _provenance(kind, version, manifest, prompt)
    chat = f'\nchat = load_dataset("<this repo or directory>", "chat", split="{split}")'
    load = f'from datasets import load_dataset\n\nds = load_dataset("<this repo or directory>", split="{split}")' + (
        chat if split_kind(kind).sft_records else ""
    )
    body = f"""
# {card(name)}: {split_kind(kind).title} `{version}`

Single-step environment-simulation samples in the EnvSimBench style: given the state `s_t`
(`state_before_json`), an action (`tool`, `arguments_json`) and the tool's source code (`code`), predict the
observation (`raw_observation` / `observation_json`) and the next state `s'_t` (`state_after_json`); `delta` is
the list of changes (`op`, `path` as a list of keys, `before`/`after` as JSON) and `delta_size` = |Δ|.
Every sample was produced by executing real environment code; states are canonical JSON. The environments ran
under a frozen clock: `current_time` is the wall-clock time (ISO 8601, UTC) the environment read during the
action (`datetime.now()`, `time.time()`…), so a timestamp the action writes into `s'_t` is predictable from it
(null for samples without a recorded clock).

## Composition

{_composition_table(manifest)}

Total: **{rows}** samples from **{len(per_env)}** environments.

## Environment coverage

{envs}

## Provenance

{md_records([{"field": k, "value": v} for k, v in provenance.items()], ["field", "value"], limit=len(provenance))}

Environment sources and licenses:

{md_records([{"source": k, "license": v} for k, v in licenses.items()], ["source", "license"], limit=len(licenses))}

## How to load

```python
{load}
```

## Data Fields

{data_fields(pq.read_schema(samples))}

## Limitations

{_limitations(manifest, kind)}

## Citation

{_citation(name, kind, version)}
"""
    body += _extra_sections(kind, envsimbench_format)
    return _round_tripped(card_text(front, body), configs)


def _composition_table(manifest: dict[str, Any]) -> str:
    """The card's Composition: each stratum requested, selected, its environments and what is missing (and its
    distinct (env, tool) pairs and top tool's share, where the manifest has them)."""
    tools = {t["stratum"]: t for t in manifest.get("tools") or []}
    return md_records(
        [{**tools.get(t["stratum"], {}), **t, "samples": t["selected"]} for t in manifest["strata"]],
        ["stratum", "requested", "samples", "environments", "missing"]
        + (["tool_pairs", "top_tool", "top_tool_share"] if tools else []),
        limit=len(manifest["strata"]),
    )


def _provenance(kind: str, version: str, manifest: dict[str, Any], prompt: str) -> dict[str, Any]:
    """The card's Provenance fields: version, seed, input, protocol and template (+ import source, decontamination)."""
    spec = manifest["spec"]
    provenance = {
        "split version": version,
        "kind": kind,
        "seed": spec["seed"],
        "input fingerprint": spec["input"],
        "protocol": PROTOCOL_VERSION,
        "prompt template": prompt,
    }
    if manifest.get("imported"):
        provenance["imported from"] = manifest["imported"].get("source", "?")
    provenance.update({field: spec[key] for field, key in split_kind(kind).spec_provenance if key in spec})
    return provenance


def _extra_sections(kind: str, envsimbench_format: bool) -> str:
    """What the card adds for a mixture (its SFT configs) and for an export in the EnvSimBench format."""
    body = ""
    sft = split_kind(kind).sft_records
    if sft:
        body += """
The `chat` (system / user / assistant messages) and `alpaca` (instruction / input / output) configs are SFT
records built with the same prompt protocol the evaluation harness uses (the `envsim` template states the
current time; the `envsimbench` template is the reference prompt as published, without it); `dataset_info.json`
registers both with LLaMA-Factory. The assistant answer is `{"feedback", "config_changes"}`; applying the changes to
`s_t` reproduces `s'_t` for every record.
"""
    if envsimbench_format:
        body += """
`envsimbench/benchmark.json` is the split in the published EnvSimBench format (a JSON list of `task_info` /
`env_code` / `step_detail` samples) for its evaluation script""" + (
            """; `envsimbench/sft_alpaca.jsonl` holds the SFT records in its Alpaca template
(`<name>_envsimbench_alpaca` in `dataset_info.json`).
"""
            if sft
            else ".\n"
        )
    return body


def _round_tripped(text: str, configs: list[dict[str, Any]]) -> str:
    """``text``, once its YAML front matter parses back the way huggingface_hub's DatasetCard parses a card
    (YAML -> DatasetCardData) with the same ``configs``."""
    import yaml
    from huggingface_hub.repocard_data import (
        DatasetCardData,  # not DatasetCard: that import pulls the Hub client (~0.3 s)
    )

    parsed = DatasetCardData(**yaml.safe_load(text.split("---\n", 2)[1]))
    if parsed.to_dict().get("configs") != configs:
        raise ValueError("the generated dataset card does not round-trip its configs")
    return text
