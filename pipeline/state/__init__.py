"""Canonical state snapshots and state deltas."""

from pipeline.state.canonical import canonical_json, canonicalize, state_hash
from pipeline.state.delta import DeltaError, DeltaRecord, apply, diff, display_path

__all__ = [
    "DeltaError",
    "DeltaRecord",
    "apply",
    "canonical_json",
    "canonicalize",
    "diff",
    "display_path",
    "state_hash",
]
