"""The layers of ``pipeline/``: imports only run down, the domain core runs without Dagster.

``LAYERS`` lists the packages of ``pipeline/`` from the bottom up (docs/layout.md "Layout"): a module may import
its own package and any package below it, never one beside or above it. ``core`` (shared types and
rules) is the bottom; ``store`` (files, tables, DuckDB) sits under every stage and imports none of them.
"""

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: bottom first; packages on one line share a layer and may not import each other
LAYERS: list[tuple[str, ...]] = [
    ("core",),          # canonical state, Δ, trajectory, environment protocol, outcome, strata, prompt protocol
    ("store",),         # data root layout, Parquet, DuckDB, split versions
    ("envs",),          # environment sources behind the environment protocol
    ("execution",),     # the sandbox: zygote, children, isolation, labels computed in the parent
    ("labeling",),      # step rows, labeled_steps, determinism, quarantine
    ("collect",),       # trajectory collection (keeps the labels it observed: imports labeling's rows)
    ("select",),        # stratification, benchmark split, Balance2 mixture
    ("quality", "envsimbench"),  # great-expectations suites; the EnvSimBench reference format
    ("export",),        # Hugging Face layout, Hub push
    ("evaluate",),      # simulators, metrics, the evaluation loop
    ("training",),      # GPU work: LLaMA-Factory, serving, launchers, what the evaluation job computes
    ("rollouts",),      # simulators in the loop
    ("curriculum",),    # α-curriculum mixtures
    ("__main__", "definitions"),  # the CLI and the Dagster definitions
]
RANK = {name: i for i, layer in enumerate(LAYERS) for name in layer}


def _modules() -> list[Path]:
    return sorted(p for p in (ROOT / "pipeline").rglob("*.py") if "__pycache__" not in p.parts)


def _package(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "pipeline" else None


def _import_nodes(path: Path) -> list[tuple[ast.AST, bool]]:
    """Every import statement of ``path`` with whether it runs at import time (module level, outside
    ``if TYPE_CHECKING``) — an import inside a function hides a cycle."""
    tree = ast.parse(path.read_text(), filename=str(path))
    top = {id(n) for n in tree.body}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out.append((node, id(node) in top))
    return out


def _targets(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    assert isinstance(node, ast.ImportFrom)
    if node.level:
        raise AssertionError(f"relative import at line {node.lineno}: use the absolute module name")
    if node.module == "pipeline":
        return [f"pipeline.{a.name}" for a in node.names]
    return [node.module or ""]


def test_every_package_has_a_layer():
    packages = {p.relative_to(ROOT / "pipeline").parts[0].removesuffix(".py") for p in _modules()} - {"__init__"}
    assert packages <= set(RANK), f"packages of pipeline/ without a layer in LAYERS: {sorted(packages - set(RANK))}"


def test_imports_only_run_down():
    upward, hidden = [], []
    for path in _modules():
        rel = path.relative_to(ROOT)
        module = ".".join(rel.with_suffix("").parts).removesuffix(".__init__")
        source = _package(module)
        for node, at_top in _import_nodes(path):
            for target in _targets(node):
                if not target.startswith("pipeline"):
                    continue
                dest = _package(target)
                if not at_top:
                    hidden.append(f"{rel}:{node.lineno} imports {target} inside a function")
                if dest is None or source is None or dest == source:
                    continue
                if RANK[dest] >= RANK[source]:
                    upward.append(f"{rel}:{node.lineno} ({source}) imports {target} ({dest})")
    assert upward == [], "imports that run upward or sideways between layers:\n" + "\n".join(upward)
    assert hidden == [], "imports of pipeline modules inside functions:\n" + "\n".join(hidden)


def test_the_layer_test_catches_an_upward_import(tmp_path):
    """The rule is not vacuous: a store module importing a stage is found."""
    bad = tmp_path / "bad.py"
    bad.write_text("from pipeline.select.selection import build_benchmark\n")
    [(node, at_top)] = _import_nodes(bad)
    assert at_top and RANK[_package(_targets(node)[0])] > RANK["store"]


def _imports(path: Path) -> set[str]:
    return {t.split(".")[0] for node, _ in _import_nodes(path) for t in _targets(node)}


def test_no_dagster_import_in_domain_core():
    offenders = [
        str(p.relative_to(ROOT))
        for p in _modules()
        if p.name != "definitions.py"
        and any(m in ("assets", "resources") or m.startswith("dagster") for m in _imports(p))
    ]
    assert offenders == [], f"pipeline modules importing dagster/assets/resources: {offenders}"


def test_domain_core_runs_without_dagster():
    modules = sorted(
        ".".join(p.relative_to(ROOT).with_suffix("").parts)
        for p in _modules()
        if p.name not in ("definitions.py", "__main__.py")
    )
    code = (
        "import sys; sys.modules['dagster'] = None; sys.modules['dagster_pipes'] = None\n"  # dagster imports now raise
        + "".join(f"import {m.removesuffix('.__init__')}\n" for m in modules)
        + "print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_definitions_load():
    from pipeline.definitions import defs

    keys = {k.to_user_string() for k in defs.resolve_all_asset_keys()}
    assert {"environment_catalog", "trajectories", "labeled_steps"} <= keys
    assert defs.resolve_job_def("envsim_main") is not None
