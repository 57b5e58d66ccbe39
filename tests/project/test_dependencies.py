"""Every third-party module that pipeline/, assets/, resources/ and cli/ import is declared in pyproject.toml."""

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("pipeline", "assets", "resources", "cli")
# Modules that run in the LLaMA-Factory job environment (.venv-train, made by ./forge train-env), not in .venv:
# their imports are declared in requirements-train.txt, torch by ./forge's ENVSIM_TRAIN_TORCH pin.
JOB_ENV_FILES = {"pipeline/training/lf_check.py", "pipeline/training/gguf_convert.py", "pipeline/serve/grpo.py"}
JOB_ENV_PREINSTALLED = {"torch"}
# Optional dependencies of a library that a call of ours needs: distribution -> (the call, where it is made).
CALLED_THROUGH = {"tabulate": ("to_markdown(", "pipeline/report/tables.py")}  # pandas.DataFrame.to_markdown


def _requirements(path: Path) -> set[str]:
    return {
        _normal(re.split(r"[=<>!~ ;\[]", line, maxsplit=1)[0].strip())
        for line in path.read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    }


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def imported_modules() -> dict[str, set[str]]:
    """Top-level module name -> the files importing it (every import statement, also inside functions)."""
    found: dict[str, set[str]] = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    found.setdefault(name.split(".")[0], set()).add(str(path.relative_to(ROOT)))
    return found


def declared() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    specs = list(project["dependencies"]) + [
        s for extra in project.get("optional-dependencies", {}).values() for s in extra
    ]
    return {_normal(re.split(r"[=<>!~ ;\[]", spec, maxsplit=1)[0]) for spec in specs}


def test_every_imported_distribution_is_declared():
    ours = set(PACKAGES) | {"tests"}
    distributions = importlib.metadata.packages_distributions()
    # bfcl-eval: installed with --no-deps from requirements-nodeps.txt (its declared dependencies are not wanted)
    have, missing = declared() | _requirements(ROOT / "requirements-nodeps.txt"), {}
    job_env = _requirements(ROOT / "requirements-train.txt") | JOB_ENV_PREINSTALLED
    for module, files in sorted(imported_modules().items()):
        if module in sys.stdlib_module_names or module in ours or module == "__future__":
            continue
        if files <= JOB_ENV_FILES:
            assert _normal(module) in job_env, (
                f"{module} (imported in {sorted(files)}) is not in requirements-train.txt"
            )
            continue
        dists = distributions.get(module)
        assert dists, f"{module} (imported in {sorted(files)}) is not installed: no distribution provides it"
        if not {_normal(d) for d in dists} & have:
            missing[module] = (sorted(dists), sorted(files))
    assert not missing, "imported but not declared in pyproject.toml: " + "; ".join(
        f"{module} (distribution {'/'.join(d)}; imported in {', '.join(f)})" for module, (d, f) in missing.items()
    )


def test_optional_dependencies_our_calls_need_are_declared():
    for distribution, (call, path) in CALLED_THROUGH.items():
        assert call in (ROOT / path).read_text(), f"{path} no longer calls {call}: is {distribution} still needed?"
        assert _normal(distribution) in declared(), (
            f"{distribution} ({call} in {path}) is not declared in pyproject.toml"
        )


def test_the_scan_sees_imports():
    """The collector finds what the code imports (it must not pass by seeing nothing)."""
    modules = imported_modules()
    assert {"dagster", "duckdb", "pyarrow", "pipeline"} <= set(modules)
    assert "assets/definitions.py" in modules["dagster"]


def test_a_deprecated_dagster_api_called_from_our_code_is_an_error():
    """pyproject's filterwarnings: Dagster's deprecation warnings name the calling module, and ours are errors."""
    import pytest
    from dagster import build_asset_context

    with pytest.raises(DeprecationWarning, match="run_id is deprecated"):
        build_asset_context().run_id  # noqa: B018  (the deprecated property, called from a tests module)
