"""envsim-forge domain core: environments, labeling, strata, selection, export (no Dagster here)."""

import os as _os

# Arrow's default pool (mimalloc) keeps freed pages mapped; jemalloc purged at once gives them back,
# which bounds the peak memory of the streaming stages (see pipeline/store/memory.py). Takes effect
# when pyarrow is imported after this package; an explicit ARROW_DEFAULT_MEMORY_POOL wins.
_os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "jemalloc")
