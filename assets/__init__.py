"""Dagster assets, grouped by pipeline stage (thin: config in, calls into ``pipeline``, a MaterializeResult
out; what an asset computes or reports is ``pipeline``'s, e.g. ``pipeline.collect.result.CollectionResult.facts``
and ``pipeline.training.sft_run``, so no asset body exceeds 50 lines: ``tests/assets/test_assets.py``)."""

from pipeline.core.settings import prepare_process

# what loads the assets is an entry point (the code location, the CLI): its process is prepared first, before any
# asset module imports pyarrow
prepare_process()
