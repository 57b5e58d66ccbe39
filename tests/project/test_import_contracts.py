"""The tiers of the code base as import-linter contracts, run in CI, and the shape of the import graph.

The contracts live in ``pyproject.toml`` (``[tool.importlinter]``; docs/layout.md "Tiers"): ``pipeline/`` is a
foundation (core, store, report), an engine (envs, execution, labeling, models) and stages that are siblings,
each importing another stage only where the ``stages`` contract declares it; the Dagster layer (assets >
resources) sits on top. ``lint-imports`` checks them here, so ``./forge test`` (and ``.ci/run``) does.

:func:`shape` measures what the contracts leave: imports that run up a tier, circles between packages and
floors (the most packages on one chain of imports), over ``pipeline`` (one node per package), ``assets``,
``resources`` and ``cli`` (one node each).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path

import grimp  # import-linter's graph builder
from importlinter import api

ROOT = Path(__file__).resolve().parents[2]
ROOTS = ("pipeline", "assets", "resources", "cli")
#: the floors before the tiers (issue 27: "tall and thin (12 floors)"); docs/layout.md records both numbers
FLOORS_BEFORE = 12


@lru_cache(maxsize=1)
def contracts() -> dict[str, dict]:
    """The contracts of ``pyproject.toml`` by id."""
    return {c["id"]: c for c in api.read_configuration(str(ROOT / "pyproject.toml"))["contracts_options"]}


def _members(layer: str) -> list[str]:
    return [name.strip().strip("()") for name in re.split(r"[|:]", layer)]


def tiers() -> list[list[str]]:
    """The tiers of the whole code base, bottom first: the ``tiers`` contract's layers of ``pipeline`` (its
    packages), then ``resources`` and ``assets`` (the ``dagster-layer`` contract), then ``cli`` (the ``cli``
    contract: none of them imports it)."""
    inner = [_members(layer) for layer in reversed(contracts()["tiers"]["layers"])]
    outer = [_members(layer) for layer in reversed(contracts()["dagster-layer"]["layers"])]
    assert outer[0] == ["pipeline"], outer
    top = sorted(contracts()["cli"]["forbidden_modules"])
    assert top == ["cli"] and sorted(contracts()["cli"]["source_modules"]) == sorted(m for t in outer for m in t), top
    return inner + outer[1:] + [top]


def room(module: str) -> str | None:
    """The node of ``module`` in the package graph: its package of ``pipeline`` (``pipeline.store.layout`` →
    ``store``), or its root for ``assets`` / ``resources`` / ``cli``; ``pipeline`` itself has none."""
    parts = module.split(".")
    if parts[0] == "pipeline":
        return parts[1] if len(parts) > 1 else None
    return parts[0]


def package_graph() -> dict[str, set[str]]:
    """``{package: the packages it imports}`` (module level and inside functions alike) of this checkout."""
    graph = grimp.build_graph(*ROOTS, cache_dir=None)
    edges: dict[str, set[str]] = {}
    for module in graph.modules:
        source = room(module)
        if source is None:
            continue
        edges.setdefault(source, set())
        for imported in graph.find_modules_directly_imported_by(module):
            target = room(imported)
            if target is not None and target != source:
                edges[source].add(target)
    return edges


def exempt() -> set[tuple[str, str]]:
    """The package pairs the contracts' ``ignore_imports`` allow (``pipeline.curriculum.** -> pipeline.select.**``:
    ``(curriculum, select)``)."""
    pairs = set()
    for contract in contracts().values():
        for line in contract.get("ignore_imports", ()):
            importer, imported = (room(side.strip().removesuffix(".**")) for side in line.split("->"))
            pairs.add((importer, imported))
    return pairs


@dataclass(frozen=True)
class Shape:
    upward: list[str]  # "a -> b" where b is in a higher tier than a (and the pair is not exempt)
    cycles: list[list[str]]  # the packages of each circle (strongly connected, more than one package)
    floors: int  # the most packages on one chain of imports
    chain: list[str]  # one longest chain, top first


def shape(edges: dict[str, set[str]], tier_of: dict[str, int], allowed: set[tuple[str, str]] = frozenset()) -> Shape:
    """Upward imports against ``tier_of`` (but the ``allowed`` pairs), circles (Tarjan's strongly connected
    components) and floors (the longest path, counted in packages) of a package graph."""
    nodes = sorted(set(edges) | {b for targets in edges.values() for b in targets})
    upward = sorted(
        f"{a} -> {b}" for a in nodes for b in edges.get(a, ()) if tier_of[b] > tier_of[a] and (a, b) not in allowed
    )

    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in nodes:
        if v not in index:
            connect(v)
    if cycles:
        return Shape(upward, cycles, 0, [])

    @cache
    def longest(v: str) -> tuple[str, ...]:
        below = [longest(w) for w in sorted(edges.get(v, ()))]
        return (v, *max(below, key=len, default=()))

    chain = max((longest(v) for v in nodes), key=len, default=())
    return Shape(upward, cycles, len(chain), list(chain))


def measured() -> Shape:
    tier_of = {name: i for i, tier in enumerate(tiers()) for name in tier}
    return shape(package_graph(), tier_of, exempt())


def recorded_floors() -> int:
    """The floors docs/layout.md records ("**N floors**")."""
    match = re.search(r"\*\*(\d+) floors\*\*", (ROOT / "docs" / "layout.md").read_text())
    assert match, 'docs/layout.md does not record the floors ("**N floors**")'
    return int(match.group(1))


def lint_imports(config: Path, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` (the console script beside this interpreter) on ``config``, importing from ``cwd``."""
    script = Path(sys.executable).with_name("lint-imports")
    return subprocess.run(
        [str(script), "--no-cache", "--no-logo", str(config)],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(cwd)},
        timeout=300,
    )


def test_the_contracts_are_kept():
    out = lint_imports(ROOT / "pyproject.toml")
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"Contracts: {len(contracts())} kept, 0 broken." in out.stdout, out.stdout


def test_every_stage_is_a_sibling():
    """The ``stages`` contract covers every package of the stage tier: a new stage cannot skip the rule that
    stages import each other only as declared."""
    stage_tier = tiers()[2]
    assert sorted(m.removeprefix("pipeline.") for m in contracts()["stages"]["modules"]) == sorted(stage_tier)


def _copy_tree(dest: Path) -> None:
    for root in ROOTS:
        shutil.copytree(ROOT / root, dest / root, ignore=shutil.ignore_patterns("__pycache__"))


def test_lint_imports_catches_an_upward_import(tmp_path):
    """The contracts are not vacuous: in a copy of the tree, a store module importing a stage breaks the tiers
    (and the foundation), named with its line."""
    _copy_tree(tmp_path)
    (tmp_path / "pipeline" / "store" / "upward.py").write_text("from pipeline.select.selection import select_strata\n")
    out = lint_imports(ROOT / "pyproject.toml", cwd=tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "Tiers: stages > engine > foundation BROKEN" in out.stdout, out.stdout
    assert "pipeline.store.upward -> pipeline.select.selection (l.1)" in out.stdout, out.stdout


def test_lint_imports_catches_an_undeclared_stage_import(tmp_path):
    """A stage importing another stage without a declaration breaks ``stages``: the contracts with one declared
    dependency (curriculum -> select) struck find the real import it covered."""
    text = (ROOT / "pyproject.toml").read_text()
    declaration = '    "pipeline.curriculum.** -> pipeline.select.**",'
    assert declaration in text
    config = tmp_path / "pyproject.toml"
    config.write_text("\n".join(line for line in text.splitlines() if not line.startswith(declaration)) + "\n")
    out = lint_imports(config)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "Stages are siblings: a stage imports another only as declared here BROKEN" in out.stdout, out.stdout
    assert "pipeline.curriculum is not allowed to import pipeline.select" in out.stdout, out.stdout


def test_the_shape_measure_on_known_graphs():
    tier_of = {"core": 0, "store": 0, "stage": 1, "top": 2}
    flat = shape({"top": {"stage", "core"}, "stage": {"store"}, "store": {"core"}}, tier_of)
    assert (flat.upward, flat.cycles, flat.floors, flat.chain) == ([], [], 4, ["top", "stage", "store", "core"])
    circle = shape({"core": {"stage"}, "stage": {"store"}, "store": {"core"}}, tier_of)
    assert circle.cycles == [["core", "stage", "store"]] and circle.upward == ["core -> stage"]
    assert shape({"core": {"stage"}}, tier_of, allowed={("core", "stage")}).upward == []  # a declared exception


def test_the_import_graph_is_flat():
    """0 imports running up a tier, 0 circles, and fewer floors than the 12 before the tiers — at most the
    number docs/layout.md records."""
    got = measured()
    assert got.upward == [], f"imports running up a tier: {got.upward}"
    assert got.cycles == [], f"circles between packages: {got.cycles}"
    assert got.floors < FLOORS_BEFORE, f"{got.floors} floors: {' -> '.join(got.chain)}"
    assert got.floors <= recorded_floors(), (
        f"{got.floors} floors ({' -> '.join(got.chain)}), more than the {recorded_floors()} docs/layout.md records"
    )
