"""Man pages of the shipped programs, made from one source: each program's own `-h` text.

`render()` turns a help text (a `Usage:` line, a description, an options
list, closing paragraphs) into a man(7) page; `./toolkit man-pages` runs each
program built here with -h and writes man/<program>.1, which every package
installs (`make man_install`, part of `make install`).  The reference's short
names (copybw, ...) get `.so` pages that point at the full ones.  A help text
that changes without its page is caught by `./toolkit man-pages --check`
(tests/python/test_manpages.py).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from gdrkit.version import REPO_ROOT, VERSION

MAN_DIR = REPO_ROOT / "man"
SECTION = "1"
# Every program the packages ship in bindir, and the reference's short names that link to some of them.
PROGRAMS = ("gdrcopy_sanity", "gdrcopy_copybw", "gdrcopy_copylat", "gdrcopy_apiperf", "gdrcopy_pplat", "gdrcopy_doctor")
SHORT_NAMES = {
    "sanity": "gdrcopy_sanity",
    "copybw": "gdrcopy_copybw",
    "copylat": "gdrcopy_copylat",
    "apiperf": "gdrcopy_apiperf",
}

_USAGE = re.compile(r"^usage:\s*(\S+)\s*(.*)$", re.IGNORECASE)
_OPTIONS_HEADER = re.compile(r"^(options|optional arguments):\s*$", re.IGNORECASE)
_OPTION = re.compile(r"^(\s+)(-\S.*?)(?:\s{2,}(\S.*))?$")
_EXIT_STATUS = re.compile(r"^exit status:\s*", re.IGNORECASE)


@dataclass
class Help:
    """A program's -h text, parsed."""

    synopsis: str = ""
    description: list[str] = field(default_factory=list)  # paragraphs
    options: list[tuple[str, str]] = field(default_factory=list)  # (term, text)
    notes: list[str] = field(default_factory=list)
    exit_status: str = ""


def _paragraphs(lines: Sequence[str]) -> list[str]:
    found: list[str] = []
    current: list[str] = []
    for line in [*lines, ""]:
        if line.strip():
            current.append(line.strip())
        elif current:
            found.append(" ".join(current))
            current = []
    return found


def parse(text: str) -> Help:
    """The parts of a help text: usage (with its indented continuation lines), description, options, the rest."""
    lines = text.expandtabs().rstrip().splitlines()
    if not lines or not _USAGE.match(lines[0]):
        raise ValueError(f"a help text starts with 'Usage: PROGRAM ...', not {lines[:1]}")
    parsed = Help()
    usage = _USAGE.match(lines[0])
    assert usage is not None
    synopsis = [usage.group(2)]
    index = 1
    while index < len(lines) and lines[index].startswith(" ") and not _OPTION.match(lines[index]):
        synopsis.append(lines[index].strip())
        index += 1
    parsed.synopsis = " ".join(part for part in synopsis if part)
    before: list[str] = []
    while index < len(lines) and not _OPTIONS_HEADER.match(lines[index]) and not _OPTION.match(lines[index]):
        before.append(lines[index])
        index += 1
    parsed.description = _paragraphs(before)
    if index < len(lines) and _OPTIONS_HEADER.match(lines[index]):
        index += 1
    term_indent = -1
    while index < len(lines) and (lines[index].startswith(" ") or not lines[index].strip()):
        line = lines[index]
        index += 1
        if not line.strip():
            if index < len(lines) and lines[index].startswith(" "):
                continue
            break
        option = _OPTION.match(line)
        indent = len(line) - len(line.lstrip())
        if option and (term_indent < 0 or indent <= term_indent):
            term_indent = indent
            parsed.options.append((option.group(2).strip(), (option.group(3) or "").strip()))
        elif parsed.options:
            term, said = parsed.options[-1]
            parsed.options[-1] = (term, f"{said} {line.strip()}".strip())
    for paragraph in _paragraphs(lines[index:]):
        if _EXIT_STATUS.match(paragraph):
            parsed.exit_status = _EXIT_STATUS.sub("", paragraph)
        else:
            parsed.notes.append(paragraph)
    return parsed


def _escape(text: str) -> str:
    """Text for a roff line: backslashes escaped, a leading . or ' made literal."""
    text = text.replace("\\", "\\e")
    return "\\&" + text if text[:1] in (".", "'") else text


def _term(term: str) -> str:
    """`-s size` / `-h, --help` / `--junit <file>`: options bold, their arguments italic."""
    words = []
    for word in term.split():
        comma = "," if word.endswith(",") else ""
        word = word.rstrip(",")
        if word.startswith("-"):
            name, eq, argument = word.partition("=")
            rendered = "\\fB" + name.replace("-", "\\-") + "\\fR"
            if eq:
                rendered += "=\\fI" + _escape(argument) + "\\fR"
            words.append(rendered + comma)
        else:
            words.append("\\fI" + _escape(word) + "\\fR" + comma)
    return " ".join(words)


def _synopsis(program: str, synopsis: str) -> str:
    options = _escape(synopsis).replace("-", "\\-")
    return f".B {program}\n{options}" if options else f".B {program}"


def whatis(help_text: Help) -> str:
    """The NAME line's description: the description's first sentence (or clause before a colon), no full stop."""
    first = help_text.description[0] if help_text.description else ""
    sentence = re.split(r"(?<=[A-Za-z0-9)])[.:]\s", first + " ", maxsplit=1)[0].strip().rstrip(".")
    return sentence or "a GDRCopy program"


def render(program: str, text: str, others: Sequence[str] = PROGRAMS) -> str:
    """The man page of `program` from its -h text."""
    parsed = parse(text)
    lines = [
        f".\\\" Made by gdrkit/packaging/manpages.py from `{program} -h`: change the program's help, not this file.",
        f'.TH {program.upper()} {SECTION} "" "gdrcopy {VERSION}" "User Commands"',
        ".SH NAME",
        f"{program} \\- {_escape(whatis(parsed))}",
        ".SH SYNOPSIS",
        _synopsis(program, parsed.synopsis),
        ".SH DESCRIPTION",
    ]
    for index, paragraph in enumerate(parsed.description):
        lines += ([".PP"] if index else []) + [_escape(paragraph)]
    if parsed.options:
        lines.append(".SH OPTIONS")
        for term, said in parsed.options:
            lines += [".TP", _term(term), _escape(said)]
    if parsed.exit_status:
        lines += [".SH EXIT STATUS", _escape(parsed.exit_status)]
    if parsed.notes:
        lines.append(".SH NOTES")
        for index, paragraph in enumerate(parsed.notes):
            lines += ([".PP"] if index else []) + [_escape(paragraph)]
    see_also = [f"\\fB{other}\\fR({SECTION})" for other in others if other != program]
    lines += [".SH SEE ALSO", ",\n".join(see_also)]
    return "\n".join(lines) + "\n"


def short_name_page(target: str) -> str:
    """The page of a reference short name: a .so link to the full program's page."""
    return f".so man{SECTION}/{target}.{SECTION}\n"


def pages(help_texts: dict[str, str]) -> dict[str, str]:
    """File name -> text of every page, from each program's -h text (pure)."""
    missing = sorted(set(PROGRAMS) - set(help_texts))
    if missing:
        raise ValueError(f"no help text of {', '.join(missing)}")
    found = {f"{program}.{SECTION}": render(program, help_texts[program]) for program in PROGRAMS}
    found.update({f"{short}.{SECTION}": short_name_page(target) for short, target in SHORT_NAMES.items()})
    return found
