"""The Δ round-trip verification of the labeled steps, for the whole table or one partition."""

from __future__ import annotations

from pipeline.store.layout import DataLayout
from pipeline.store.reconstruct import VerifyReport, verify_steps


def verify_labeled(layout: DataLayout, max_problems: int = 50) -> VerifyReport:
    """``reconstruct.verify_steps`` over the layout's step parts: every part for an unpartitioned
    layout, the partition's own parts (and trajectories) for a partition-scoped one — other partitions
    may be re-collected or re-labeled by their own runs at the same time."""
    return verify_steps(layout, max_problems)
