"""Line plots for asset metadata (evaluation and rollout curves), written as PNG and returned as base64."""

from __future__ import annotations

import base64
import io
from collections.abc import Callable
from pathlib import Path
from typing import Any


def line_plot(
    path: Path,
    draw: Callable[[Any], None],
    xlabel: str,
    ylabel: str,
    title: str | None = None,
    ylim: tuple[float, float] | None = None,
    metadata: dict[str, Any] | None = None,
) -> str:
    """A 700×360 line plot for asset metadata: ``draw(ax)`` plots the lines (with their labels), then axes
    labels, grid and legend; written to ``path`` as PNG (``metadata``: savefig's) and returned as base64."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.6), dpi=100)
    draw(ax)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title is not None:
        ax.set_title(title)
    if ylim is not None:
        ax.set_ylim(*ylim)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", **({"metadata": metadata} if metadata is not None else {}))
    plt.close(fig)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(buf.getvalue())
    return base64.b64encode(buf.getvalue()).decode("ascii")
