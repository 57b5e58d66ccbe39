"""The README stays a page a newcomer reads (at most 220 lines) and links every document under ``docs/``;
every relative link in README.md and docs/*.md leads to a file that exists (and an anchor to a heading it has)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted((ROOT / "docs").glob("*.md"))
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _prose(text: str) -> str:
    """The text without fenced code blocks and inline code spans (links in code are not links)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def _anchors(text: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces as hyphens."""
    heads = re.findall(r"^#{1,6} (.+?)\s*$", re.sub(r"^```.*?^```", "", text, flags=re.S | re.M), flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in heads}


def _links(path: Path) -> list[str]:
    return LINK.findall(_prose(path.read_text()))


def test_the_readme_is_short_and_links_every_document():
    readme = ROOT / "README.md"
    lines = readme.read_text().splitlines()
    assert len(lines) <= 220, f"README.md has {len(lines)} lines; move detail to docs/"
    linked = {(readme.parent / link.split("#")[0]).resolve() for link in _links(readme) if "://" not in link}
    assert DOCS, "no docs/*.md"
    unlinked = [d.name for d in DOCS if d.resolve() not in linked]
    assert not unlinked, f"README.md does not link docs/{unlinked}"


def test_every_relative_link_resolves():
    broken = []
    for path in [ROOT / "README.md", *DOCS]:
        links = _links(path)
        for link in links:
            if re.match(r"^[a-z][a-z0-9+.-]*:", link):  # http:, https:, mailto:
                continue
            target, _, anchor = link.partition("#")
            file = (path.parent / target).resolve() if target else path
            name = f"{path.relative_to(ROOT)}: {link}"
            if not file.is_file():
                broken.append(f"{name} (no such file)")
            elif anchor and file.suffix == ".md" and anchor not in _anchors(file.read_text()):
                broken.append(f"{name} (no heading with this anchor)")
    assert not broken, "broken links: " + "; ".join(broken)
    assert sum(len(_links(p)) for p in [ROOT / "README.md", *DOCS]) >= 20, "the scan found (almost) no links"
