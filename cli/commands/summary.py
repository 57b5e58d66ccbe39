"""``./forge summary``: where the data is and what it holds (:mod:`cli.summary`)."""

from __future__ import annotations

import argparse

from cli.base import command, data_root


@command("[DATA_ROOT]   print where the data is and what it holds (what ./forge run prints last)")
def summary(argv: list[str]) -> int:
    """``./forge summary [DATA_ROOT]``: the summary of the data (:func:`cli.summary.summary`)."""
    parser = argparse.ArgumentParser(prog="./forge summary", description="print where the data is and what it holds")
    parser.add_argument("data_root", nargs="?", default=None)
    args = parser.parse_args(argv)
    from cli.summary import summary as print_summary
    from pipeline.store.layout import DataLayout

    return print_summary(DataLayout.at(data_root(args.data_root)))
