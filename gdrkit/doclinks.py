"""Links between the project's Markdown pages: every relative link names a file of the tree and every
`#anchor` a heading of its page, spelled as GitHub spells heading anchors.

`./toolkit lint` runs this over the pages a reader starts from (`DOC_PAGES`); a page they link to is
read for its headings whatever its place.  External links (`https:`, `mailto:`) are not fetched.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from pathlib import Path

# The pages a reader starts from: the README, docs/, and the READMEs the docs send readers to.
DOC_PAGES = ("README.md", "docs/*.md", "packages/README.md", "libgdrapi/README.md",
             "ansible/roles/gdrcopy/README.md", "tools/h200/RESULTS.md")  # fmt: skip

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t#]*$")
# [text](target "title") and ![alt](target); the text may hold one level of [brackets] or `code`.
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_DEFINITION = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
# GitHub's anchors of lines in a file that is not rendered as Markdown: #L12 or #L12-L20.
LINE_ANCHOR = re.compile(r"L\d+(-L\d+)?")


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: its rendered text lower-cased, punctuation dropped, each space a hyphen.

    As github-slugger does: letters, digits, combining marks, `_` and `-` stay, every other symbol
    or punctuation mark (`.`, `:`, `(`, `–`, `×`) goes; spaces are not merged.
    """
    text = CODE_SPAN.sub(lambda m: m.group(2), heading)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link keeps its text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML keeps its text
    text = re.sub(r"(\*\*|__|\*)(.+?)\1", r"\2", text)  # emphasis markers are not text
    kept = (c for c in text.lower() if c in " -_" or unicodedata.category(c)[0] in "LNM" or c == "_")
    return "".join(kept).replace(" ", "-")


def prose_lines(text: str) -> Iterator[tuple[int, str]]:
    """The lines of a Markdown page outside fenced code blocks, numbered from 1."""
    fence = ""
    for number, line in enumerate(text.splitlines(), 1):
        opened = FENCE.match(line)
        if fence:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence):
                fence = ""
            continue
        if opened:
            fence = opened.group(1)
            continue
        yield number, line


def anchors(text: str) -> set[str]:
    """Every anchor a page has: its headings' slugs (a repeated one gets -1, -2, ...) and <a name/id>."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for _, line in prose_lines(text):
        heading = HEADING.match(line)
        if heading:
            base = slug(heading.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
        found.update(HTML_ANCHOR.findall(line))
    return found


def links(text: str) -> Iterator[tuple[int, str]]:
    """(line, target) of every link of a page, code spans and fenced code left out."""
    for number, line in prose_lines(text):
        prose = CODE_SPAN.sub("", line)
        for match in INLINE_LINK.finditer(prose):
            yield number, match.group(1)
        definition = REFERENCE_DEFINITION.match(prose)
        if definition:
            yield number, definition.group(1)


def is_external(target: str) -> bool:
    return re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target) is not None


def check_page(root: Path, page: Path, cache: dict[Path, set[str]]) -> list[str]:
    """One finding per broken link of page: `page:line: what is wrong and what to do`."""
    findings = []
    where = page.relative_to(root)
    for number, target in links(page.read_text(encoding="utf-8")):
        if not target or is_external(target):
            continue
        path_part, _, anchor = target.partition("#")
        dest = (page.parent / path_part).resolve() if path_part else page
        if path_part:
            if root.resolve() not in (dest, *dest.parents):
                findings.append(f"{where}:{number}: {target} points outside the tree; link to a file of the tree")
                continue
            if not dest.exists():
                findings.append(f"{where}:{number}: {target}: no {dest.relative_to(root.resolve())} in the tree; "
                                f"fix the path (relative to {where.parent}/)")  # fmt: skip
                continue
        if not anchor:
            continue
        if dest.suffix != ".md":
            if not (dest.is_file() and LINE_ANCHOR.fullmatch(anchor)):
                findings.append(f"{where}:{number}: {target}: #{anchor} is not a line anchor (#L12) of a file")
            continue
        if dest not in cache:
            cache[dest] = anchors(dest.read_text(encoding="utf-8"))
        if anchor not in cache[dest]:
            name = dest.name if path_part else "this page"
            findings.append(f"{where}:{number}: {target}: {name} has no heading with the anchor #{anchor}; "
                            f"use one of its headings' anchors (lower case, punctuation dropped, spaces as -)")  # fmt: skip
    return findings


def check(root: Path) -> list[str]:
    """Broken relative links and anchors of the DOC_PAGES of root."""
    findings: list[str] = []
    cache: dict[Path, set[str]] = {}
    pages = sorted({page for pattern in DOC_PAGES for page in root.glob(pattern) if page.is_file()})
    for page in pages:
        findings += check_page(root, page, cache)
    return findings
