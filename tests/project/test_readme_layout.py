"""The "Layout" section (docs/layout.md, linked from the README) matches the tree: every package of ``pipeline/`` is
listed, tier by tier as the import contracts declare them (foundation first; tests/project/test_import_contracts.py),
and every module of a package is named in its entry."""

import re
from pathlib import Path

from tests.project.test_import_contracts import tiers

ROOT = Path(__file__).resolve().parents[2]


def _layout_block() -> list[str]:
    text = (ROOT / "docs" / "layout.md").read_text()
    section = text.split("\n## Layout\n", 1)[1]
    return section.split("```", 2)[1].splitlines()


def _entries() -> dict[str, str]:
    """``{package: its description}`` from the ``pipeline/`` part of the block (entries are indented two
    spaces, continuation lines more)."""
    entries: dict[str, str] = {}
    current = None
    for line in _layout_block():
        m = re.match(r"^  (\w+)/\s", line)
        if m:
            current = m.group(1)
            entries[current] = line
        elif current and line.startswith("    "):
            entries[current] += " " + line.strip()
        elif line and not line.startswith(" "):
            current = None if not line.startswith("pipeline/") else current
    return entries


def _packages() -> list[str]:
    return sorted(p.name for p in (ROOT / "pipeline").iterdir() if (p / "__init__.py").exists())


def test_every_package_is_listed_tier_by_tier():
    listed = list(_entries())
    assert sorted(listed) == _packages(), f"docs/layout.md lists {sorted(listed)}, the tree has {_packages()}"
    tier_of = {name: i for i, tier in enumerate(tiers()) for name in tier}
    unplaced = sorted(set(listed) - set(tier_of))
    assert unplaced == [], f"packages in no tier of the 'tiers' contract (pyproject.toml): {unplaced}"
    order = sorted(listed, key=lambda name: tier_of[name])
    assert [tier_of[name] for name in listed] == [tier_of[name] for name in order], (
        f"docs/layout.md order {listed} is not tier by tier (foundation first): {tiers()}"
    )


def test_every_module_is_named_in_its_package_entry():
    entries = _entries()
    missing = []
    for package in _packages():
        for module in sorted((ROOT / "pipeline" / package).glob("*.py")):
            stem = module.stem
            if stem == "__init__":
                continue
            if not re.search(rf"(?<![\w.]){re.escape(stem)}(\.py)?(?!\w)", entries.get(package, "")):
                missing.append(f"pipeline/{package}/{module.name}")
    assert missing == [], f"modules not named in docs/layout.md: {missing}"


def _top_entry(folder: str) -> str:
    """The ``assets/`` / ``resources/`` / ``cli/`` entry of the block with its continuation lines."""
    lines = _layout_block()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{folder}/ "))
    text = lines[start]
    for line in lines[start + 1 :]:
        if not line.startswith(" "):
            break
        text += " " + line.strip()
    return text


def test_every_assets_resources_and_cli_module_is_named():
    missing = []
    for folder in ("assets", "resources", "cli", "cli/commands"):
        entry = _top_entry(folder.split("/")[0])
        for module in sorted((ROOT / folder).glob("*.py")):
            if module.stem != "__init__" and not re.search(rf"(?<![\w.]){re.escape(module.stem)}(\.py)?(?!\w)", entry):
                missing.append(f"{folder}/{module.name}")
    assert missing == [], f"modules not named in docs/layout.md: {missing}"
