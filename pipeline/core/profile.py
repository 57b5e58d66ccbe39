"""Run profiles: ``ENVSIM_PROFILE=small`` shrinks every default (sources, exploration budget,
split sizes) for demos, the UI end-to-end tests and quick looks; ``default`` is the full run.
A source's own profile defaults (bfcl categories, builtin scenarios per environment) live with the
source (:mod:`pipeline.envs.bfcl_tasks`, :mod:`pipeline.envs.builtin`), keyed by the profile's name.

The path of a profile (docs/settings.md): the entry point builds one ``Settings`` value, the code location
takes the ``Profile`` of its ``profile`` once (``resources.sets.resources_for``) and passes it down to the
resources, which hand its values to the domain dataclasses. Nothing here reads the environment: a default
of a domain dataclass is the ``default`` profile's (:data:`DEFAULT`), never the process's.

A profile's :class:`~pipeline.core.strata.Composition` (benchmark cells, Balance2 mixture sizes) is
the composition in force unless an asset config replaces it: exploration steers toward it and the
coverage reports count against it."""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.core.strata import Composition


@dataclass(frozen=True)
class Profile:
    name: str
    explore_call_budget: int = 60_000
    #: a benchmark cell the corpus cannot fill: ``warn`` (the split holds what the corpus allows, the mixture is
    #: built from the rest) or ``fail``; ``ENVSIM_STRICT=1`` makes it ``fail`` (``resources.sets``)
    benchmark_on_shortfall: str = "warn"
    composition: Composition = field(default_factory=Composition)

    @property
    def mixture_sizes(self) -> dict[str, int]:
        return dict(self.composition.mixture_sizes)


PROFILES = {
    "default": Profile("default"),
    "small": Profile(
        "small",
        explore_call_budget=1_500,
        composition=Composition(mixture_sizes={"failure": 60, "no_change": 60, "simple": 120, "complex": 120}),
    ),
}

#: the ``default`` profile: the defaults of the domain dataclasses (a profile in force is passed down instead)
DEFAULT = PROFILES["default"]


def named(name: str) -> Profile:
    """The profile ``name``; an unknown one is a ``ValueError`` naming the known ones."""
    if name not in PROFILES:
        raise ValueError(f"unknown ENVSIM_PROFILE {name!r}; known: {sorted(PROFILES)}")
    return PROFILES[name]
