"""Process-tree helpers the sandbox tests share (the product's own: :mod:`pipeline.core.processes`)."""

from pipeline.core.processes import descendants

__all__ = ["descendants"]
