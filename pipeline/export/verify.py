"""Checks of an export against the data it came from (used by the export assets' checks)."""

from __future__ import annotations

import json
import re
from importlib.metadata import version
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.core.protocol import non_finite_free, plain_text, reproduces
from pipeline.store.layout import DataLayout
from pipeline.store.verdicts import code_digest, file_digest, kept

#: an export's checks: (check name, its problems)
Checks = list[tuple[str, list[str]]]


def _load(directory: Path, config: str | None, split: str):
    """``load_dataset`` of what is on disk now: a private cache, because the shared one is keyed by
    the directory name and file sizes and can hand back an earlier export of the same place. Without ``datasets``'
    progress bars ("Generating test split: …" between the run's log lines), unless ``HF_DATASETS_DISABLE_PROGRESS_BARS``
    says otherwise; their state is restored after."""
    import shutil
    import tempfile

    import datasets
    from datasets import load_dataset

    quiet = not datasets.are_progress_bars_disabled() and datasets.config.HF_DATASETS_DISABLE_PROGRESS_BARS is None
    if quiet:
        datasets.disable_progress_bars()
    cache = tempfile.mkdtemp(prefix="envsim-verify-")
    args = (str(directory), config) if config else (str(directory),)
    try:
        return load_dataset(*args, split=split, cache_dir=cache, keep_in_memory=True)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
        if quiet:
            datasets.enable_progress_bars()


def verify_roundtrip(directory: Path, samples: Path, split: str) -> list[str]:
    """``datasets.load_dataset(directory)`` gives back exactly the split's rows and typed features."""
    from datasets import Features

    problems: list[str] = []
    table = pq.read_table(samples)
    ds = _load(directory, None, split)
    expected_features = Features.from_arrow_schema(table.schema)
    if ds.features != expected_features:
        problems.append(f"features differ: exported {ds.features} vs data {expected_features}")
    if ds.num_rows != table.num_rows:
        problems.append(f"{ds.num_rows} rows exported, {table.num_rows} in the split")
        return problems
    loaded = ds.with_format("arrow")[:]
    if not problems and _same_values(loaded, table):
        return problems
    for i, (got, want) in enumerate(zip(loaded.to_pylist(), table.to_pylist())):
        if got != want:
            diff = sorted(k for k in want if got.get(k) != want[k])
            problems.append(f"row {i} ({want['step_id']}): columns {diff} differ")
            if len(problems) >= 20:
                break
    return problems


def verify_answers(directory: Path, samples: Path, split: str = "train") -> tuple[int, list[str]]:
    """Every exported chat record's answer, applied to its sample's s_t, reproduces s'_t."""
    by_step = {
        r["step_id"]: r
        for r in pq.read_table(samples, columns=["step_id", "state_before_json", "state_after_json"]).to_pylist()
    }
    problems: list[str] = []
    records = _load(directory, "chat", split).with_format("arrow")[:]
    for step_id, messages in zip(records.column("step_id").to_pylist(), records.column("messages").to_pylist()):
        sample = by_step.get(step_id)
        if sample is None:
            problems.append(f"{step_id}: record without a sample")
            continue
        before, after = plain_text(sample["state_before_json"]), plain_text(sample["state_after_json"])
        try:
            changes = json.loads(messages[-1]["content"])["config_changes"]
            nan_free = non_finite_free(before, after, json.dumps(changes))
            same, error = reproduces(json.loads(before), json.loads(after), changes, nan_free)
        except (ValueError, KeyError, TypeError) as exc:
            same, error = False, str(exc)
        if error is not None:
            problems.append(f"{step_id}: answer does not apply: {error}")
        elif not same:
            problems.append(f"{step_id}: answer applied to s_t does not give s'_t")
    return records.num_rows, problems


def _same_values(loaded: pa.Table, table: pa.Table) -> bool:
    """Whether the loaded dataset's Arrow table holds exactly the split's values (the split's table cast to the
    loaded schema, which differs only in nullability and metadata once the features match): at C speed, where a
    row-by-row comparison in Python takes seconds; False sends the caller to that comparison, which names the rows."""
    try:
        return loaded.equals(table.cast(loaded.schema.remove_metadata()))
    except (pa.ArrowException, ValueError, TypeError):
        return False


#: the sections every export's card has (besides the composition, coverage and provenance checked by number)
CARD_SECTIONS = ("## Data Fields", "## Limitations", "## Citation")


def verify_card(directory: Path, samples: Path, split: str) -> list[str]:
    """The card's numbers (rows, bytes of the data files, per-stratum counts, environments) match the data, it
    has the sections of :data:`CARD_SECTIONS`, and its Data Fields section names every column of the data files."""
    from huggingface_hub import DatasetCard

    card = DatasetCard.load(directory / "README.md")
    df = pq.read_table(samples, columns=["stratum", "env_id"]).to_pandas()
    problems: list[str] = []
    entries = {s["name"]: s for s in card.data.to_dict()["dataset_info"]["splits"]}
    splits = {name: s["num_examples"] for name, s in entries.items()}
    if splits.get(split) != len(df):
        problems.append(f"card says {splits.get(split)} {split} examples, data has {len(df)}")
    data_files = sorted((directory / "data").glob(f"{split}-*.parquet"))
    num_bytes = sum(f.stat().st_size for f in data_files)
    if entries.get(split, {}).get("num_bytes") != num_bytes:
        problems.append(
            f"card says {entries.get(split, {}).get('num_bytes')} bytes of {split} data, its files hold {num_bytes}"
        )
    missing = [s for s in CARD_SECTIONS if f"\n{s}\n" not in card.text]
    if missing:
        problems.append(f"card lacks the sections {missing}")
    if "## Data Fields" not in missing and data_files:
        fields = card.text.split("\n## Data Fields\n", 1)[1].split("\n## ", 1)[0]
        unnamed = [c for c in pq.read_schema(data_files[0]).names if f"- `{c}` (" not in fields]
        if unnamed:
            problems.append(f"card's Data Fields section does not describe the columns {unnamed}")
    m = re.search(r"Total: \*\*(\d+)\*\* samples from \*\*(\d+)\*\* environments", card.text)
    if not m or (int(m.group(1)), int(m.group(2))) != (len(df), df["env_id"].nunique()):
        problems.append("card total / environment count does not match the data")
    section = card.text.split("## Composition", 1)[1].split("##", 1)[0]
    counts = df.groupby("stratum").size().to_dict()
    rows = [r.strip().strip("|").split("|") for r in section.strip().splitlines() if r.startswith("|")][2:]
    stated = {cells[0].strip(): int(cells[2]) for cells in rows}
    if {k: v for k, v in stated.items() if v} != counts:
        problems.append(f"card composition {stated} does not match the data {counts}")
    return problems


def export_checks(directory: Path, samples: Path, split: str, sft_records: bool) -> Checks:
    """Every check of an export against its split's samples: it loads back exactly, its card matches the data, and
    (SFT records) every answer applied to its s_t reproduces s'_t."""
    checks = [
        ("loads_back_exactly", verify_roundtrip(directory, samples, split)),
        ("card_matches_data", verify_card(directory, samples, split)),
    ]
    if sft_records:
        checks.append(("answers_reproduce_next_state", verify_answers(directory, samples, split)[1]))
    return checks


def kept_export_checks(
    layout: DataLayout, kind: str, directory: Path, samples: Path, split: str, sft_records: bool
) -> tuple[Checks, bool]:
    """:func:`export_checks`, once per content of what they read (every file of the export and the samples, by their
    bytes), the code of the ``pipeline`` package and the ``datasets`` / ``huggingface_hub`` that load it: a rerun
    whose export did not change reads the checks the last run wrote (``quality/export_checks-<kind>.json``, failing
    ones too) instead of loading the dataset again. Returns (the checks, whether they were kept)."""
    files = sorted(f for f in directory.rglob("*") if f.is_file())
    inputs = {
        "export": [(str(f.relative_to(directory)), file_digest(f)) for f in files],
        "samples": file_digest(samples),
        "split": split,
        "sft_records": sft_records,
        "code": code_digest(),
        "libraries": [version("datasets"), version("huggingface_hub"), version("pyarrow")],
    }
    computed: list[bool] = []

    def compute() -> Checks:
        computed.append(True)
        return export_checks(directory, samples, split, sft_records)

    checks = kept(
        layout.quality_dir / f"export_checks-{kind}.json",
        inputs,
        compute,
        lambda result: [[name, problems] for name, problems in result],
        lambda doc, _: [(str(name), [str(p) for p in problems]) for name, problems in doc],
    )
    return checks, not computed
