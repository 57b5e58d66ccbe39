"""The benchmark composition in force: one resource that every asset steering or counting by the
composition shares — exploration targets (``trajectories``), the candidate tables of ``labeled_steps``
and ``step_strata``, the cells of ``benchmark_split`` and the sizes of ``sft_mixture``. Configure it
once (Launchpad: ``resources: composition: config: …``); the default is the profile's
(``pipeline.core.profile``: EnvSimBench's 400-sample cells and the Balance2 sizes)."""

from typing import Literal

from dagster import ConfigurableResource
from pydantic import Field

from pipeline.core import profile
from pipeline.core.strata import Cell, Composition
from resources.config_from import config_from


class CellConfig(config_from(Cell)):
    """A benchmark cell: the steps that qualify (outcome, |Δ| range, argument count) and its quota
    (fields: ``Cell``)."""

    @classmethod
    def of(cls, cell: Cell) -> "CellConfig":
        return cls(**cell.to_dict())


def default_cells(of: profile.Profile = profile.PROFILES["default"]) -> list[CellConfig]:
    """The benchmark cells of the profile ``of`` as config."""
    return [CellConfig.of(c) for c in of.composition.cells]


class CompositionResource(ConfigurableResource):
    """The composition in force: benchmark cells (rule + quota) and Balance2 mixture sizes, with how hard
    collection pursues it (the exploration call budget) and what a benchmark short of it does; ``strict``:
    whether a corpus that cannot give it clean data — a quarantined environment — fails the run."""

    cells: list[CellConfig] = Field(
        default_factory=default_cells,
        description="Benchmark cells (rule + quota); default: the profile's (EnvSimBench's 400).",
    )
    mixture_sizes: dict[str, int] = Field(
        default_factory=lambda: dict(profile.PROFILES["default"].mixture_sizes),
        description="Samples per Balance2 group; default: the profile's.",
    )
    explore_call_budget: int = Field(
        default=profile.PROFILES["default"].explore_call_budget,
        ge=0,
        description="The most tool calls exploration may spend steering toward the "
        "composition: its budget scales with the corpus (environments, scenarios and tools) and grows while "
        "calls find something new, up to this (a `trajectories` config's `call_budget` "
        "overrides both); default: the profile's.",
    )
    on_shortfall: Literal["fail", "warn"] = Field(
        default=profile.PROFILES["default"].benchmark_on_shortfall,  # type: ignore[arg-type]
        description="A benchmark cell the corpus cannot fill warns (`benchmark_split` holds what the corpus allows, "
        "the mixture is built from the rest) or fails `benchmark_split` (a `benchmark_split` config's `on_shortfall` "
        "overrides it); default: the profile's, `warn` (`fail` with ENVSIM_STRICT=1).",
    )

    strict: bool = Field(
        default=False,
        description="An environment the checks of `labeled_steps` quarantine (labels that do not verify, or differ "
        "when executed again) fails the run (severity ERROR, blocking) instead of being excluded while the others go "
        "on (a `relabel_is_deterministic` config's `strict` overrides it); the code location's default: ENVSIM_STRICT.",
    )

    @classmethod
    def of(cls, chosen: profile.Profile, strict: bool = False) -> "CompositionResource":
        """The composition of the profile ``chosen``; ``strict`` (``ENVSIM_STRICT``) makes a benchmark
        shortfall fail, as it makes a quarantined environment fail."""
        return cls(
            cells=default_cells(chosen),
            mixture_sizes=dict(chosen.mixture_sizes),
            explore_call_budget=chosen.explore_call_budget,
            on_shortfall="fail" if strict else chosen.benchmark_on_shortfall,
            strict=strict,
        )

    def composition(self) -> Composition:
        return Composition(tuple(c.to_domain() for c in self.cells), self.mixture_sizes)
