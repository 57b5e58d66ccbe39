"""The benchmark composition in force as asset config: benchmark cells (``CellConfig``, derived from
the domain's ``Cell``) and Balance2 mixture sizes. Default: the profile's composition
(``pipeline.core.profile``). Exploration (``trajectories``), the coverage report (``step_strata``) and
the splits take it from their config."""

from dagster import Config
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


def default_cells() -> list[CellConfig]:
    return [CellConfig.of(c) for c in profile.current().composition.cells]


class CompositionConfig(Config):
    """The composition exploration steers toward and the coverage reports count against; set it to
    the ``benchmark_split`` / ``sft_mixture`` config when those are customized."""

    cells: list[CellConfig] = Field(default_factory=default_cells,
                                    description="Benchmark cells (rule + quota); default: the profile's (EnvSimBench's 400).")
    mixture_sizes: dict[str, int] = Field(default_factory=lambda: profile.current().mixture_sizes,
                                          description="Samples per Balance2 group; default: the profile's.")

    def to_domain(self) -> Composition:
        return Composition(tuple(c.to_domain() for c in self.cells), self.mixture_sizes)
