"""The benchmark composition in force (``composition``, shared by every asset that steers or counts by it: the
exploration targets, the candidate tables of ``labeled_steps`` and ``step_strata``, the cells of ``benchmark_split``
and the sizes of ``sft_mixture``) and the run policy (``run_policy``: how hard a run pursues it, what a shortfall does).
Both default to the profile's (``pipeline/profiles/<name>.toml``) and are configured once under ``resources:``."""

from dagster import ConfigurableResource
from pydantic import Field

from pipeline.core.profile import RunPolicy
from pipeline.core.strata import Cell, Composition
from resources.config_from import config_from


class CellConfig(config_from(Cell)):
    """A benchmark cell: the steps that qualify (outcome, |Δ| range, argument count) and its quota
    (fields: ``Cell``)."""


class CompositionResource(ConfigurableResource):
    """The composition in force: benchmark cells (rule + quota) and Balance2 mixture sizes."""

    model_config = {**ConfigurableResource.model_config, "extra": "forbid"}  # a mistyped key is refused

    cells: list[CellConfig] = Field(
        default_factory=lambda: [CellConfig(**c.to_dict()) for c in Composition().cells],
        description="Benchmark cells (rule + quota); default: the profile's (EnvSimBench's 400).",
    )
    mixture_sizes: dict[str, int] = Field(
        default_factory=lambda: dict(Composition().mixture_sizes),
        description="Samples per Balance2 group; default: the profile's.",
    )

    def composition(self) -> Composition:
        return Composition(tuple(c.to_domain() for c in self.cells), self.mixture_sizes)


class RunPolicyResource(config_from(RunPolicy, base=ConfigurableResource)):
    """The run policy (fields: ``RunPolicy``): the exploration call cap, what a short benchmark does, and
    whether a quarantined environment fails the run."""
