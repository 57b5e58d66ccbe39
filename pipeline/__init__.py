"""envsim-forge domain core: environments, labeling, strata, selection, export (no Dagster here)."""

import os as _os

# Arrow's default mimalloc pool keeps freed pages mapped, so the peak RSS of a streaming scan grows
# with everything it ever touched; the system allocator gives large blocks back at once (measured:
# materialising 5K samples peaks ~80 MiB lower). Set before pyarrow is first imported; an explicit
# ARROW_DEFAULT_MEMORY_POOL wins.
_os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
