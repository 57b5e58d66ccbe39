"""A decontamination rule and a mixture composition, each an entry of its registry by entry point."""

from __future__ import annotations

from pipeline.core.decontamination import Decontamination
from pipeline.select.selection import MixtureComposition

#: no mixture step of a benchmark episode; the same (s_t, a_t) from another episode may stay (laxer than the default)
EPISODE = Decontamination("episode", "trajectory_id", ("trajectory_id", "sample_hash"), "(episode, s_t, a_t)")

#: only steps that change the state (the simple and complex Balance2 groups), drawn uniformly
CHANGES_ONLY = MixtureComposition(
    "changes_only",
    lambda sizes: [("changes", "balance2_group IN ('simple', 'complex')", sizes["simple"] + sizes["complex"])],
    picking="uniform",
    record={"picking": "seeded rank (uniform random), state changes only"},
)
