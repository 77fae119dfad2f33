"""Every link in README.md and docs/*.md leads somewhere: a file of the repository, and an anchor
that a heading of the page it names makes (GitHub's slugs).  The README was split into docs/
pages by topic; a section moved without its links would otherwise send readers nowhere."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    t = heading.strip().lower()
    t = re.sub(r"[^\w\- ]", "", t)
    return t.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    out, fence = set(), False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            fence = not fence
        elif not fence and (m := re.match(r"^#{1,6} (.*)", line)):
            out.add(slug(m.group(1)))
    return out


def links(page: Path):
    fence = False
    for n, line in enumerate(page.read_text().splitlines(), 1):
        if line.startswith("```"):
            fence = not fence
        elif not fence:
            for target in LINK.findall(line):
                if not re.match(r"^(https?|mailto):", target):
                    yield n, target


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_link_of_a_page_leads_somewhere(page):
    broken = []
    for n, target in links(page):
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{page.name}:{n}: {target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{page.name}:{n}: {target} (no such heading)")
    assert broken == []


def test_the_front_page_is_short_and_names_every_doc():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 160
    named = set(re.findall(r"\(docs/([\w\-]+\.md)\)", readme))
    assert {p.name for p in PAGES[1:]} <= named, sorted({p.name for p in PAGES[1:]} - named)
