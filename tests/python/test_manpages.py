"""Man pages (gdrkit/packaging/manpages.py, man/): made from the programs' -h texts, fresh, and clean for man."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from gdrkit.host import programs
from gdrkit.packaging import manpages
from gdrkit.system import ensure_debian_packages
from gdrkit.version import VERSION

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
