"""The tests mirror the source: ``tests/<package>/`` holds the tests of ``pipeline/<package>/`` (and
``tests/assets/``, ``tests/resources/`` those of the Dagster layer), ``tests/e2e/`` the end-to-end suites,
``tests/project/`` the checks of the code base as a whole, and ``tests/support/`` the shared stand-ins, harnesses
and corpus builders (no tests); the ``tests/`` root holds only ``conftest.py``. docs/layout.md "Layout" describes
this tree."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
# Folders of tests that are not a package of pipeline/: the Dagster layer, whole-pipeline suites, the code base.
OTHER_HOMES = ("assets", "resources", "e2e", "project")


def _is_test_module(path: Path) -> bool:
    """What pytest collects by default (``python_files``): ``test_*.py`` and ``*_test.py``."""
    return path.suffix == ".py" and (path.name.startswith("test_") or path.stem.endswith("_test"))


def _test_modules() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if "__pycache__" not in p.parts and _is_test_module(p))


def _pipeline_packages() -> set[str]:
    return {p.parent.name for p in (ROOT / "pipeline").glob("*/__init__.py")}


def test_the_scan_sees_the_tests_and_the_packages():
    assert len(_test_modules()) >= 50, "the scan found (almost) no test modules"
    assert {"core", "store", "envs", "execution", "labeling"} <= _pipeline_packages()


def test_the_tests_root_holds_only_conftest_and_folders():
    stray = sorted(p.name for p in TESTS.glob("*.py") if p.name not in ("__init__.py", "conftest.py"))
    assert stray == [], f"move tests under tests/<package>/ (or tests/e2e/), support modules to tests/support/: {stray}"
    folders = {p.name for p in TESTS.iterdir() if p.is_dir() and p.name != "__pycache__" and not p.name.startswith(".")}
    unknown = sorted(folders - _pipeline_packages() - set(OTHER_HOMES) - {"support"})
    assert unknown == [], f"folders of tests/ that mirror nothing: {unknown}"


def test_every_test_module_sits_in_a_folder_named_after_what_it_tests():
    homes = _pipeline_packages() | set(OTHER_HOMES)
    misplaced = []
    for module in _test_modules():
        folders = module.relative_to(TESTS).parts[:-1]
        if not folders or folders[0] not in homes:
            misplaced.append(str(module.relative_to(ROOT)))
        elif len(folders) > 1:  # deeper only where the source has that sub-package too
            source = ROOT / ("pipeline" if folders[0] in _pipeline_packages() else "") / Path(*folders)
            if not source.is_dir():
                misplaced.append(str(module.relative_to(ROOT)))
    assert misplaced == [], f"test modules outside tests/<package>/ ({', '.join(sorted(homes))}): {misplaced}"


def test_every_folder_of_tests_is_a_package():
    """Each folder of test modules has an ``__init__.py``, so two ``test_x.py`` in different folders are two
    modules (``tests.core.test_x``, ``tests.store.test_x``), never a clash on pytest's sys.path."""
    folders = {m.parent for m in _test_modules()}
    missing = sorted(str(f.relative_to(ROOT)) for f in folders if not (f / "__init__.py").is_file())
    assert missing == [], f"add an empty __init__.py to: {missing}"
