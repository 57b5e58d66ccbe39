"""The documents stay true to the tree: every module path README.md and docs/*.md cite exists, every
"docs/definitions.md §x" citation names a section the document has, nothing cites a document outside the
repository, and every ``./forge ui`` option the documents use is in ``./forge ui -h``."""

import re
import subprocess
from pathlib import Path

import pytest

from tests.support.parallel import slowest_table

ROOT = Path(__file__).resolve().parents[2]
DOCS = ("README.md", *sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")))
PATH = re.compile(r"\b((?:pipeline|assets|resources|cli|tests|benchmarks)/[A-Za-z0-9_./-]*\.py)\b")
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
    from cli.entry import main

    used = {
        (doc, word.split("=")[0])
        for doc in DOCS
        for rest in FORGE_UI.findall((ROOT / doc).read_text())
        for word in rest.split()
        if word.startswith("-")
    }
    assert ("docs/ui.md", "-p") in used, f"the scan found not even docs/ui.md's -p: {sorted(used)}"
    assert main(["ui", "-h"]) == 0
    helptext = capsys.readouterr().out
    listed = set(re.findall(r"(?<![\w-])(--?[\w-]+)", helptext))
    missing = sorted(f"{doc}: ./forge ui {word}" for doc, word in used if word not in listed)
    assert not missing, "options the docs use that ./forge ui -h does not list: " + ", ".join(missing)


def _sql_doc_objects() -> dict[str, str]:
    """docs/sql.md's table of views and tables: name (``eval_by_*`` as its family ``eval_by``) -> its row."""
    text = (ROOT / "docs/sql.md").read_text()
    rows = re.findall(r"^\| `([a-z_]+)(_\*)?` \| (?:view|table) \|(.*)$", text, re.M)
    return {name: rest for name, _, rest in rows}


def test_the_sql_docs_list_every_declared_view_and_table_and_what_writes_it():
    """docs/sql.md names every view and table the code declares (the tables of record, every split kind's samples
    view, the catalog's other tables and view families) and no other, each with what writes it."""
    from pipeline.core.axes import AXES
    from pipeline.evaluate.results import breakdown_views
    from pipeline.store import tables

    listed = _sql_doc_objects()
    declared = set(tables.declared())
    assert {"steps", "curriculum_samples", "rollout_by", "eval_by"} <= declared, "the declarations changed shape"
    assert set(listed) == declared, (
        f"docs/sql.md lists {sorted(set(listed) - declared)} that the code does not declare and leaves out "
        f"{sorted(declared - set(listed))}: fix its table of views and tables"
    )
    no_writer = sorted(name for name, row in listed.items() if not re.search(r"`[a-z_./ -]+`[^|]*\|\s*$", row))
    assert not no_writer, f"docs/sql.md names no asset or command that writes {no_writer}"
    by = {name.removeprefix("eval_by_") for name in breakdown_views(AXES)}
    assert set(re.findall(r"`(\w+)`", listed["eval_by"].split("|")[0])) == by, f"eval_by_* views: by {sorted(by)}"


@pytest.fixture(scope="module")
def main_and_all_assets() -> tuple[set[str], set[str]]:
    """The assets of the main job and of the whole code location (default settings: no launcher, so no training
    group), as ``dg list defs`` shows them."""
    from assets.definitions import build_definitions
    from assets.jobs import MAIN_JOB
    from pipeline.core.settings import Settings

    defs = build_definitions(Settings())
    main = {k.to_user_string() for k in defs.resolve_job_def(MAIN_JOB).asset_layer.executable_asset_keys}
    every = {k.to_user_string() for k in defs.resolve_all_asset_keys()}
    return main, every


def test_the_sql_docs_mark_default_exactly_what_the_main_job_writes(main_and_all_assets):
    """A row of docs/sql.md marked (default) is written by assets of the main job (what ``./forge run`` builds); a
    row not so marked by none of them."""
    main, every = main_and_all_assets
    wrong = []
    for name, row in _sql_doc_objects().items():
        writers = set(re.findall(r"`([a-z_]+)`", re.sub(r"\(job `\w+`\)", "", row.split("|")[1])))
        assert writers <= every | {"simulator_eval_job", "sft_training"}, f"{name}: not assets: {writers - every}"
        if ("(default)" in row) != bool(writers & main):
            wrong.append(name)
    assert not wrong, f"docs/sql.md marks (default) wrongly for {wrong}: main-job assets: {sorted(main)}"


def test_the_readme_asset_table_lists_every_asset_and_the_main_jobs_without_a_job(main_and_all_assets):
    """README.md's asset table holds every asset of the code location; those of another job name it."""
    main, every = main_and_all_assets
    rows = re.findall(r"^\| (`[a-z_]+`(?: / `[a-z_]+`)*)( \(job `\w+`\))? \|", (ROOT / "README.md").read_text(), re.M)
    listed = {name: bool(job) for names, job in rows for name in re.findall(r"`([a-z_]+)`", names)}
    assert set(listed) == every, (
        f"README.md's asset table: {sorted(every - set(listed))} missing, {sorted(set(listed) - every)} extra"
    )
    wrong = sorted(name for name, other_job in listed.items() if other_job == (name in main))
    assert not wrong, f"README.md: name the job of exactly the assets outside the main job: {wrong}"


def test_the_slowest_tests_table_is_the_recorded_runs():
    """docs/commands.md's ten slowest tests are those of tests/support/durations.json, as
    ``python -m tests.support.parallel`` prints them (a new recording changes both)."""
    text = (ROOT / "docs" / "commands.md").read_text()
    table = slowest_table()
    assert table.splitlines()[2] in text, "re-run `python -m tests.support.parallel` and paste its table"
    assert table in text
