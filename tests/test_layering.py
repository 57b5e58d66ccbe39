"""pipeline/ is the domain core: only pipeline/definitions.py may import dagster."""

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_no_dagster_import_in_domain_core():
    offenders = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "pipeline").rglob("*.py")
        if p.name != "definitions.py"
        and any(m == "assets" or m == "resources" or m.startswith("dagster") for m in _imports(p))
    ]
    assert offenders == [], f"pipeline modules importing dagster/assets/resources: {offenders}"


def test_domain_core_runs_without_dagster():
    modules = sorted(
        ".".join(p.relative_to(ROOT).with_suffix("").parts)
        for p in (ROOT / "pipeline").rglob("*.py")
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
