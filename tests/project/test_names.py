"""Names that explain themselves: no name of the code base shadows a builtin behind a trailing underscore
(``ImportError_``), and a module is named after what it holds."""

import ast
import builtins
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _definitions() -> list[tuple[str, str]]:
    """(``path:line``, name) of every class, function and assignment under pipeline/, assets/, resources/, cli/."""
    found = []
    for path in sorted(p for d in ("pipeline", "assets", "resources", "cli") for p in (ROOT / d).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [node.name] if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) else []
            if isinstance(node, ast.Assign):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            found += [(f"{path.relative_to(ROOT)}:{node.lineno}", name) for name in names]
    return found


def test_no_name_is_a_builtin_with_a_trailing_underscore():
    found = _definitions()
    assert len(found) > 1000, "the scan found (almost) no definitions"
    shadowing = [f"{where} {name}" for where, name in found if name.endswith("_") and name.rstrip("_") in dir(builtins)]
    assert shadowing == []


def test_the_module_of_untrusted_ids_and_text_is_named_for_them():
    """Id validation and report escaping live in ``pipeline/core/untrusted.py``; ``safe_name`` (a path component
    under the data root) is ``pipeline.store.layout``'s, so no module is named ``safe_names`` without one."""
    assert (ROOT / "pipeline" / "core" / "untrusted.py").exists()
    assert not list((ROOT / "pipeline").rglob("safe_names.py"))
