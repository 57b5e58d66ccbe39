"""Process-tree helpers the sandbox tests share."""

from pathlib import Path


def descendants(pid: int) -> list[int]:
    """Every descendant of ``pid`` (depth first), read from ``/proc/<pid>/task/*/children``."""
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children = (task / "children").read_text().split()
        except OSError:
            continue
        for child in map(int, children):
            out += [child, *descendants(child)]
    return out
