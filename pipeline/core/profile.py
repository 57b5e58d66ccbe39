"""Run profiles: one TOML file per profile (``pipeline/profiles/<name>.toml``, or a path the user names) holding
every default it changes, one section per resource (``[sources.<source>]``, ``[composition]``, ``[run_policy]``)
with that resource's config keys; ``default`` changes nothing, ``small`` shrinks everything for demos and tests.
The code location validates the sections when it builds the resources; nothing here reads the environment.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pipeline.core.fields import setting
from pipeline.core.strata import Cell, Composition

#: the profiles of this tree, one file each
PROFILES_DIR = Path(__file__).resolve().parent.parent / "profiles"
#: the sections a profile may hold: the resources whose defaults it changes
SECTIONS = ("sources", "composition", "run_policy")


class ProfileError(ValueError):
    """A profile that does not exist or does not parse; one line naming its file and the fix."""


@dataclass(frozen=True)
class RunPolicy:
    """How hard a run pursues its composition and what it does when the corpus falls short of it."""

    strict: bool = setting(
        False,
        "An environment the checks of `labeled_steps` quarantine (labels that do not verify, or differ when "
        "executed again) fails the run (severity ERROR, blocking) instead of being excluded while the others go on "
        "(a `relabel_is_deterministic` config's `strict` overrides it); the code location's default: ENVSIM_STRICT.",
    )
    explore_call_budget: int = setting(
        60_000,
        "The most tool calls exploration may spend steering toward the composition: its budget scales with the "
        "corpus (environments, scenarios and tools) and grows while calls find something new, up to this "
        "(a `trajectories` config's `call_budget` overrides both).",
    )
    on_shortfall: Literal["warn", "fail"] = setting(
        "warn",
        "A benchmark cell the corpus cannot fill warns (`benchmark_split` holds what the corpus allows, the mixture "
        "is built from the rest) or fails `benchmark_split` (a `benchmark_split` config's `on_shortfall` overrides "
        "it); `fail` with ENVSIM_STRICT=1.",
    )


@dataclass(frozen=True)
class Profile:
    """A profile: its name, its file, and the defaults it changes per section."""

    name: str
    path: Path | None = None
    sections: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def section(self, name: str) -> dict[str, Any]:
        """The defaults this profile changes in section ``name`` (none: empty)."""
        return dict(self.sections.get(name, {}))

    def composition(self) -> Composition:
        """The :class:`~pipeline.core.strata.Composition` of its ``[composition]`` section."""
        given = self.section("composition")
        if "cells" in given:
            given["cells"] = tuple(Cell(**c) for c in given["cells"])
        return Composition(**given)


def available() -> tuple[str, ...]:
    """The names of this tree's profiles."""
    return tuple(sorted(p.stem for p in PROFILES_DIR.glob("*.toml")))


def _path(name: str) -> Path:
    return Path(name) if name.endswith(".toml") or "/" in name else PROFILES_DIR / f"{name}.toml"


def check(name: str) -> str:
    """``name`` if it names a profile (one of :func:`available`, or a TOML file), else ``ValueError``."""
    if not _path(name).is_file():
        raise ValueError(f"no profile {name!r}: name one of {', '.join(available())}, or the path of a .toml file")
    return name


def named(name: str) -> Profile:
    """The profile ``name`` (or a ``.toml`` path); :class:`ProfileError` when it does not parse or is unknown."""
    path = _path(check(name))
    try:
        sections = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"profile {name} ({path}) is not valid TOML: {exc}") from None
    unknown = sorted(set(sections) - set(SECTIONS))
    if unknown:
        raise ProfileError(
            f"profile {name} ({path}): unknown section {', '.join(unknown)}; sections: {', '.join(SECTIONS)}"
        )
    return Profile(path.stem, path, sections)
