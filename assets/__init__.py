"""Dagster assets, grouped by pipeline stage (thin: config in, one call into ``pipeline``)."""
