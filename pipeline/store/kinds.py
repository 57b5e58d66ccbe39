"""The split kinds: one :class:`SplitKind` record each, from which its store, version ids, DuckDB view, export and
summary lines are derived; a new kind is one record, here or a plugin's ``envsim_forge.split_kinds`` entry point
(docs/extending.md). No pyarrow here: the sandbox worker reaches this module through the glossary."""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.core.registry import Registry

BENCHMARK, MIXTURE, CURRICULUM = "benchmark", "sft_mixture", "curriculum"


@dataclass(frozen=True)
class SplitKind:
    """One kind of versioned split: ``name`` (its directory, ``<name>_samples`` view and ``kind`` value), ``prefix``
    (of its version ids), ``title`` (what the card calls a version), ``hf_split`` (the split its export writes),
    ``sft_records`` (its export adds the SFT configs, checked), ``reference_format`` (its export also writes the
    EnvSimBench format), ``spec_provenance`` ((card field, spec key) pairs), ``composition_note`` (what the card says
    it leaves out), ``samples_description`` (its view's description) and ``summary_note`` (the footnote under its
    summary table; None: not in the summary)."""

    name: str
    prefix: str
    title: str
    hf_split: str = "train"
    sft_records: bool = False
    reference_format: bool = False
    spec_provenance: tuple[tuple[str, str], ...] = ()
    composition_note: str = ""
    samples_description: str = ""
    summary_note: str | None = None

    def describe_samples(self) -> str:
        return self.samples_description or (
            f"Samples of every {self.title} version (data/splits/{self.name}/<version>/samples.parquet)."
        )


#: every split kind, in the order the DuckDB tables register them; iterating gives their names
SPLIT_KINDS: Registry[SplitKind] = Registry(
    "split kind", "envsim_forge.split_kinds", check=lambda entry: isinstance(entry, SplitKind)
)
for _kind in (
    SplitKind(
        BENCHMARK,
        "bench",
        "benchmark split",
        hf_split="test",
        reference_format=True,
        composition_note="and |Δ| > 12 (`beyond`) is left out",
        samples_description="Samples of every benchmark version (data/splits/benchmark/<version>/samples.parquet), "
        "full states materialised; `version` names the version.",
        summary_note="available: the cell's distinct (s_t, a_t) samples a version can draw (steps that repeat a "
        "sample count once; error steps and quarantined environments left out), so below the cell's candidates "
        "above, which count every step",
    ),
    SplitKind(
        MIXTURE,
        "sft",
        "Balance2 SFT mixture",
        sft_records=True,
        spec_provenance=(("benchmark version", "benchmark"), ("decontaminated by", "decontaminate")),
        samples_description="Samples of every Balance2 SFT mixture version "
        "(data/splits/sft_mixture/<version>/samples.parquet).",
        summary_note="available: the group's distinct (s_t, a_t) samples left after decontamination against the "
        "benchmark (before_decontamination minus the removed_by columns; repeats counted once, errors and "
        "quarantined environments left out), so below the group's candidates above, which count every step",
    ),
    SplitKind(
        CURRICULUM,
        "cur",
        "α-curriculum mixture",
        sft_records=True,
        spec_provenance=(("benchmark version", "benchmark"),),
    ),
):
    SPLIT_KINDS.register(_kind)


def split_kind(name: str) -> SplitKind:
    """The kind ``name``, or a KeyError naming the known ones."""
    return SPLIT_KINDS.get(name)
