"""Man pages of the shipped programs, made from one source: each program's own `-h` text.

`render()` turns a help text (a `Usage:` line, a description, an options
list, closing paragraphs) into a man(7) page; `./toolkit man-pages` runs each
program built here with -h and writes man/<program>.1, which every package
installs (`make man_install`, part of `make install`).  The reference's short
names (copybw, ...) get `.so` pages that point at the full ones.  A help text
that changes without its page is caught by `./toolkit man-pages --check`
(tests/python/test_manpages.py).

Each page's ENVIRONMENT section lists the library's variables from their one
home, the "Environment" table of libgdrapi/README.md (`environment()`): every
program here opens libgdrapi, the doctor too.
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
# The one home of the library's environment variables: a table of `VARIABLE` | effect rows.
ENVIRONMENT_HOME = REPO_ROOT / "libgdrapi" / "README.md"
ENVIRONMENT_HEADING = "## Environment"
_ENV_ROW = re.compile(r"^\|\s*`(GDRCOPY_[A-Z0-9_]+)(=[^`]*)?`\s*\|\s*(.*?)\s*\|\s*$")


def environment(text: str | None = None) -> list[tuple[str, str]]:
    """(variable as the table writes it, its effect's first sentence) of each row of the home's table.

    Markdown is dropped (backticks) and so are pointers into the README ("(see above)"), which mean
    nothing in a man page."""
    text = ENVIRONMENT_HOME.read_text() if text is None else text
    start = text.find(f"\n{ENVIRONMENT_HEADING}\n")
    if start < 0:
        raise ValueError(f"{ENVIRONMENT_HOME.name} has no '{ENVIRONMENT_HEADING}' section: the man pages read it")
    section = text[start + 1 :].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        row = _ENV_ROW.match(line)
        if row:
            effect = re.sub(r"\s*\([^()]*\babove\b[^()]*\)", "", row.group(3).replace("`", ""))
            first = re.split(r"(?<=[a-z0-9)])\.\s+(?=[A-Z])", effect, maxsplit=1)[0].rstrip(".") + "."
            rows.append((row.group(1) + (row.group(2) or ""), first))
    if not rows:
        raise ValueError(f"the '{ENVIRONMENT_HEADING}' table of {ENVIRONMENT_HOME.name} has no `GDRCOPY_...` row")
    return rows


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


def render(
    program: str, text: str, others: Sequence[str] = PROGRAMS, variables: Sequence[tuple[str, str]] | None = None
) -> str:
    """The man page of `program` from its -h text and the library's variables (default: their home's)."""
    parsed = parse(text)
    variables = environment() if variables is None else variables
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
    lines += [".SH ENVIRONMENT", f"{program} opens libgdrapi, which reads these variables (libgdrapi/README.md):"]
    for variable, effect in variables:
        name, eq, value = variable.partition("=")
        lines += [".TP", f"\\fB{name}\\fR" + (f"=\\fI{_escape(value)}\\fR" if eq else ""), _escape(effect)]
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
    variables = environment()
    found = {f"{program}.{SECTION}": render(program, help_texts[program], variables=variables) for program in PROGRAMS}
    found.update({f"{short}.{SECTION}": short_name_page(target) for short, target in SHORT_NAMES.items()})
    return found
