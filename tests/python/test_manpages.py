"""Man pages (gdrkit/packaging/manpages.py, man/): made from the programs' -h texts, fresh, and clean for man."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from gdrkit.host import programs
from gdrkit.packaging import manpages
from gdrkit.system import ensure_debian_packages
from gdrkit.version import REPO_ROOT, VERSION

HELP = """Usage: gdrcopy_demo [-h] [-s size] [--junit=<file>]
          [-v]

Copies things. Measures them too.

Options:
  -h, --help      print this help text and exit
  -s size         bytes to copy (default: 1024);
                  a multiple of 4
  --junit=<file>  also write .junit XML
  -v              verbose

Exit status: 0 when it worked, 1 otherwise.

Sizes accept K, M and G suffixes.
"""


def test_a_help_text_is_parsed_into_its_parts() -> None:
    parsed = manpages.parse(HELP)
    assert parsed.synopsis == "[-h] [-s size] [--junit=<file>] [-v]"
    assert parsed.description == ["Copies things. Measures them too."]
    assert [term for term, _ in parsed.options] == ["-h, --help", "-s size", "--junit=<file>", "-v"]
    assert parsed.options[1][1] == "bytes to copy (default: 1024); a multiple of 4"
    assert parsed.exit_status == "0 when it worked, 1 otherwise."
    assert parsed.notes == ["Sizes accept K, M and G suffixes."]


def test_the_page_has_name_synopsis_options_and_escapes() -> None:
    page = manpages.render("gdrcopy_demo", HELP, others=("gdrcopy_demo", "gdrcopy_sanity"))
    assert f'.TH GDRCOPY_DEMO 1 "" "gdrcopy {VERSION}" "User Commands"' in page
    assert ".SH NAME\ngdrcopy_demo \\- Copies things\n" in page
    assert "[\\-h] [\\-s size] [\\-\\-junit=<file>] [\\-v]" in page
    assert ".TP\n\\fB\\-s\\fR \\fIsize\\fR\n" in page and "\\fB\\-\\-junit\\fR=\\fI<file>\\fR" in page
    assert "\\&.junit" not in page and "also write .junit XML" in page, "a dot inside a line needs no escape"
    assert ".SH EXIT STATUS\n" in page and ".SH SEE ALSO\n\\fBgdrcopy_sanity\\fR(1)\n" in page


def test_a_text_without_a_usage_line_is_refused() -> None:
    with pytest.raises(ValueError, match="Usage"):
        manpages.parse("gdrcopy_demo: copies things\n")


def test_every_shipped_program_and_short_name_has_a_page() -> None:
    pages = sorted(p.name for p in manpages.MAN_DIR.glob("*.1"))
    wanted = sorted([f"{p}.1" for p in manpages.PROGRAMS] + [f"{s}.1" for s in manpages.SHORT_NAMES])
    assert pages == wanted
    built = {path.name for path in programs.BUILT.values()} | {"gdrcopy_doctor"}
    assert set(manpages.PROGRAMS) == built, "a program the packages ship without a page, or a page of none"


def test_gdrcopy_doctors_page_matches_its_help() -> None:
    """The doctor needs no build: its page is checked on every run."""
    help_text = programs.doctor_help_text()
    committed = (manpages.MAN_DIR / "gdrcopy_doctor.1").read_text()
    assert committed == manpages.render("gdrcopy_doctor", help_text), "run ./toolkit man-pages and commit man/"


def test_the_committed_pages_match_the_built_programs(tree_programs: None) -> None:
    made = manpages.pages(programs.help_texts())
    stale = sorted(name for name, text in made.items() if (manpages.MAN_DIR / name).read_text() != text)
    assert not stale, f"man/ is out of date: {stale}; run ./toolkit man-pages and commit man/"


def test_man_renders_every_page_without_a_warning(tmp_path: Path) -> None:
    ensure_debian_packages(["man-db"])
    # The layout the packages install, so that the short names' .so requests resolve.
    section = tmp_path / "man1"
    shutil.copytree(manpages.MAN_DIR, section)
    for page in sorted(section.glob("*.1")):
        result = subprocess.run(
            ["man", "--warnings", "-E", "UTF-8", "-l", "-Tutf8", "-Z", str(page)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env={**os.environ, "MANWIDTH": "80", "LC_ALL": "C.UTF-8"},
        )
        assert result.returncode == 0 and result.stderr == "", (page.name, result.stderr)


def test_every_page_has_an_environment_section_from_the_one_home() -> None:
    variables = manpages.environment()
    for program in manpages.PROGRAMS:
        page = (manpages.MAN_DIR / f"{program}.1").read_text()
        section = page.split(".SH ENVIRONMENT\n", 1)[1].split("\n.SH ", 1)[0]
        named = [line.removeprefix("\\fB").split("\\fR")[0] for line in section.splitlines() if line.startswith("\\fB")]
        assert named == [variable.split("=")[0] for variable, _ in variables], program


def test_the_home_names_every_variable_the_library_reads_and_no_other() -> None:
    """libgdrapi's getenv() calls against libgdrapi/README.md's Environment table, both ways."""
    read = set()
    for source in (REPO_ROOT / "libgdrapi" / "src").glob("*.c"):
        read |= set(re.findall(r'getenv\("(GDRCOPY_[A-Z0-9_]+)"\)', source.read_text()))
    text = manpages.ENVIRONMENT_HOME.read_text()
    table = text.split(f"\n{manpages.ENVIRONMENT_HEADING}\n", 1)[1].split("\n## ", 1)[0]
    rows = {variable.split("=")[0] for variable, _ in manpages.environment()}
    assert rows <= read, f"rows for variables the library does not read: {sorted(rows - read)}"
    # A variable may be explained in another's row (GDRCOPY_PARALLEL_MIN_SIZE in GDRCOPY_COPY_THREADS's).
    assert {v for v in read if v not in table} == set(), "give each a row in libgdrapi/README.md's Environment"


def test_the_environment_table_is_read_as_written() -> None:
    home = "intro\n\n## Environment\n\n| Variable | Effect |\n|---|---|\n" \
        "| `GDRCOPY_A` | Does a (see above). More. |\n| `GDRCOPY_B=N` | Uses `N` threads. |\n\n## Next\n| `GDRCOPY_C` | x |\n"  # fmt: skip
    assert manpages.environment(home) == [("GDRCOPY_A", "Does a."), ("GDRCOPY_B=N", "Uses N threads.")]
    with pytest.raises(ValueError, match="no '## Environment' section"):
        manpages.environment("## Other\n")
    page = manpages.render("gdrcopy_demo", HELP, variables=[("GDRCOPY_B=N", "Uses N threads.")])
    assert ".SH ENVIRONMENT\ngdrcopy_demo opens libgdrapi" in page
    assert ".TP\n\\fBGDRCOPY_B\\fR=\\fIN\\fR\nUses N threads.\n.SH NOTES" in page
