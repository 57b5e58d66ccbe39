"""The split kinds: one :class:`SplitKind` record each, the one home of what a kind is (imported by modules that must
not load pyarrow, such as the glossary the sandbox worker reaches through the environment registry).

A kind's record gives it everything the generic parts derive: its store (``data/splits/<name>/``, versions and
``CURRENT``), its version ids (``<prefix>-<digest>``), its DuckDB view (``<name>_samples``), its Hugging Face export
(split name, card, SFT records or not) and its lines in ``./forge run``'s summary. A new kind is one record: one
``SPLIT_KINDS.register(SplitKind(...))`` here, or an ``envsim_forge.split_kinds`` entry point of a plugin
(docs/extending.md); what writes its versions is its own asset, through
:func:`pipeline.select.selection.write_version`."""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.core.registry import Registry

BENCHMARK, MIXTURE, CURRICULUM = "benchmark", "sft_mixture", "curriculum"


@dataclass(frozen=True)
class SplitKind:
    """One kind of versioned split.

    ``name``: its directory under ``data/splits/``, its ``<name>_samples`` view and its ``kind`` value everywhere.
    ``prefix``: its version ids, ``<prefix>-<digest of the spec>``. ``title``: what the dataset card and the
    citation call a version. ``hf_split``: the split its export writes (``test`` for an evaluation set).
    ``sft_records``: its export adds the ``chat`` / ``alpaca`` SFT configs and LLaMA-Factory's
    ``dataset_info.json``, and checks that every answer reproduces its next state. ``reference_format``: its export
    also writes the published EnvSimBench format unless the export's config says otherwise. ``spec_provenance``:
    (card field, spec key) pairs the card's provenance adds. ``composition_note``: what the card says it leaves
    out beyond error steps. ``samples_description``: the ``<name>_samples`` view's description (default: one naming
    its files). ``summary_note``: the footnote under its table in ``./forge run``'s summary; None: the summary does
    not report the kind."""

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
SPLIT_KINDS.register(
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
    )
)
SPLIT_KINDS.register(
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
    )
)
SPLIT_KINDS.register(
    SplitKind(
        CURRICULUM,
        "cur",
        "α-curriculum mixture",
        sft_records=True,
        spec_provenance=(("benchmark version", "benchmark"),),
    )
)


def split_kind(name: str) -> SplitKind:
    """The kind ``name``, or a KeyError naming the known ones."""
    return SPLIT_KINDS.get(name)
