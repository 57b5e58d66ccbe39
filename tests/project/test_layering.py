"""What the import contracts cannot say about ``pipeline/`` (the tiers themselves are import-linter contracts:
pyproject.toml ``[tool.importlinter]``, checked by tests/project/test_import_contracts.py; docs/layout.md "Tiers").

* No import of a ``pipeline`` module inside a function: the import graph sees it, but it runs late and hides a
  circle from Python's import order.
* The domain core imports and runs with Dagster unimportable (a dynamic import no contract sees), and the
  definitions load.
"""

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _modules() -> list[Path]:
    return sorted(p for p in (ROOT / "pipeline").rglob("*.py") if "__pycache__" not in p.parts)


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


def hidden_imports(path: Path) -> list[str]:
    """``file:line imports X inside a function`` for every import of a ``pipeline`` module that does not run
    at import time (in a function, a method, or under ``if TYPE_CHECKING``)."""
    rel = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    return [
        f"{rel}:{node.lineno} imports {target} inside a function"
        for node, at_top in _import_nodes(path)
        if not at_top
        for target in _targets(node)
        if target.startswith("pipeline")
    ]


def test_no_pipeline_import_inside_a_function():
    hidden = [line for path in _modules() for line in hidden_imports(path)]
    assert hidden == [], "imports of pipeline modules inside functions:\n" + "\n".join(hidden)


def test_the_hidden_import_check_catches_one(tmp_path):
    """The rule is not vacuous: a stage import inside a function is found; one at module level is not."""
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import json\nfrom pipeline.store import layout\n\n\ndef f():\n"
        "    from pipeline.select.selection import select_strata\n    return select_strata\n"
    )
    assert hidden_imports(bad) == [f"{bad}:6 imports pipeline.select.selection inside a function"]


def test_domain_core_runs_without_dagster():
    modules = sorted(".".join(p.relative_to(ROOT).with_suffix("").parts) for p in _modules() if p.name != "__main__.py")
    code = (
        "import sys; sys.modules['dagster'] = None; sys.modules['dagster_pipes'] = None\n"  # dagster imports now raise
        + "".join(f"import {m.removesuffix('.__init__')}\n" for m in modules)
        + "print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_definitions_load():
    from assets.definitions import defs as load

    defs = load()
    keys = {k.to_user_string() for k in defs.resolve_all_asset_keys()}
    assert {"environment_catalog", "trajectories", "labeled_steps"} <= keys
    assert defs.resolve_job_def("envsim_main") is not None
