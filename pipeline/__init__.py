"""envsim-forge domain core: environments, labeling, strata, selection, export (no Dagster here)."""
