"""``./forge partitions``: the partition keys ``ENVSIM_SHARDS`` gives."""

from __future__ import annotations

import argparse

from cli.base import command


@command("   print the partition keys ENVSIM_SHARDS gives")
def partitions(argv: list[str]) -> int:
    """``./forge partitions``: the partition keys ``ENVSIM_SHARDS`` gives, one a line (none when unset)."""
    argparse.ArgumentParser(prog="./forge partitions", description="the partition keys ENVSIM_SHARDS gives").parse_args(
        argv
    )
    from pipeline.core.settings import settings
    from pipeline.envs.partitions import partition_keys

    count = settings().shards
    print("\n".join(partition_keys(count)) if count else "", end="\n" if count else "")
    return 0
