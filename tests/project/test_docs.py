"""The documents stay true to the tree: every module path README.md and docs/*.md cite exists, every
"docs/definitions.md §x" citation names a section the document has, nothing cites a document outside the
repository, and every ``./forge ui`` option the documents use is in ``./forge ui -h``."""

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ("README.md", *sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")))
PATH = re.compile(r"\b((?:pipeline|assets|resources|tests|benchmarks)/[A-Za-z0-9_./-]*\.py)\b")
#: ``./forge ui`` and what follows it on the line, up to a redirection, a comment or the end of a code span
FORGE_UI = re.compile(r"\./forge ui\b([^`>#&|\n]*)")
CITATION = re.compile(r"docs/definitions\.md §\s*(\d+(?:\.\d+)?)(?:\s*[–-]\s*(\d+(?:\.\d+)?))?")


def _tracked_text_files() -> dict[str, str]:
    names = subprocess.run(
        ["git", "ls-files", "*.py", "*.md", "forge", ".ci/run"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    return {n: (ROOT / n).read_text(errors="replace") for n in names if (ROOT / n).is_file()}


def test_every_cited_module_path_exists():
    cited = {(doc, p) for doc in DOCS for p in PATH.findall((ROOT / doc).read_text())}
    assert len({p for _, p in cited if p.startswith("pipeline/")}) >= 10, "the scan found (almost) no paths"
    missing = sorted(f"{doc}: {p}" for doc, p in cited if not (ROOT / p).is_file())
    assert not missing, "cited but not in the tree: " + ", ".join(missing)


def test_section_citations_name_existing_sections():
    sections = set(re.findall(r"^#{2,3} (\d+(?:\.\d+)?)\.? ", (ROOT / "docs/definitions.md").read_text(), re.M))
    assert {"3", "4.1", "4.2", "5", "6", "7", "8"} <= sections
    bad = []
    for name, text in _tracked_text_files().items():
        for first, last in CITATION.findall(text):
            bad += [f"{name}: §{n}" for n in (first, last) if n and n not in sections]
    assert not bad, "citations of sections docs/definitions.md does not have: " + ", ".join(bad)


def test_no_citation_of_a_document_outside_the_repository():
    outside = sorted(
        name
        for name, text in _tracked_text_files().items()
        if name != "tests/project/test_docs.py" and ("shared/DESIGN.md" in text or re.search(r"\bDESIGN §", text))
    )
    assert not outside, f"cite docs/definitions.md instead of the design document outside the repository: {outside}"


def test_every_forge_ui_option_the_docs_use_is_in_its_help(capsys):
    """``./forge ui -p 3000`` in docs/ui.md: ``./forge ui -h`` (its parser, not dg dev's bare usage) lists ``-p``."""
    from assets import cli

    used = {
        (doc, word.split("=")[0])
        for doc in DOCS
        for rest in FORGE_UI.findall((ROOT / doc).read_text())
        for word in rest.split()
        if word.startswith("-")
    }
    assert ("docs/ui.md", "-p") in used, f"the scan found not even docs/ui.md's -p: {sorted(used)}"
    assert cli.main(["ui", "-h"]) == 0
    helptext = capsys.readouterr().out
    listed = set(re.findall(r"(?<![\w-])(--?[\w-]+)", helptext))
    missing = sorted(f"{doc}: ./forge ui {word}" for doc, word in used if word not in listed)
    assert not missing, "options the docs use that ./forge ui -h does not list: " + ", ".join(missing)
