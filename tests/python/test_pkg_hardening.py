"""The hardening check of packaged ELF files, and the lint report's reading (quick; issue 36).

The build (gdrkit.packaging.pipeline) reads every ELF file of every package
it makes and fails on any miss; test_pkg_build.py judges the real packages.
Here the check itself is judged on programs compiled both ways: one built
as the packages are (hardened, stripped, debug data split off by build-id)
passes every property, one built plainly misses each, so the check can fail.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gdrkit.packaging import hardening, pipeline, toolchain
from gdrkit.system import ensure_debian_packages

SOURCE = """
#include <stdio.h>
#include <string.h>
int copy(const char *s) { char b[64]; strcpy(b, s); printf("%s %zu\\n", b, strlen(b)); return b[1]; }
int main(int argc, char **argv) { (void)argc; return copy(argv[0]); }
"""


def _cc(tmp_path: Path, name: str, flags: list[str]) -> Path:
    source = tmp_path / "prog.c"
    source.write_text(SOURCE)
    out = tmp_path / name
    subprocess.run(["gcc", *flags, "-o", str(out), str(source)], check=True)
    return out


@pytest.fixture(scope="module")
def tools() -> None:
    ensure_debian_packages(["gcc", "libc6-dev", "binutils"])


def test_a_hardened_stripped_program_with_its_debug_file_passes_every_property(tools: None, tmp_path: Path) -> None:
    flags = [
        *toolchain.HARDENING_FLAGS["CFLAGS"].split(),
        *toolchain.HARDENING_FLAGS["CPPFLAGS"].split(),
        *toolchain.HARDENING_FLAGS["LDFLAGS"].split(),
        "-fPIE",
        "-pie",
    ]
    program = _cc(tmp_path, "good", flags)
    facts = hardening.read_elf(program)
    debug = f"/usr/lib/debug/.build-id/{facts.build_id[:2]}/{facts.build_id[2:]}.debug"
    subprocess.run(["objcopy", "--only-keep-debug", str(program), str(tmp_path / "good.debug")], check=True)
    subprocess.run(["strip", "--strip-unneeded", str(program)], check=True)
    verdicts = hardening.judge(hardening.read_elf(program), [debug])
    print(verdicts)
    assert set(verdicts) == set(hardening.PROPERTIES)
    assert all(v.startswith("yes") for v in verdicts.values()), verdicts


def test_a_plain_program_misses_each_property(tools: None, tmp_path: Path) -> None:
    program = _cc(
        tmp_path,
        "plain",
        ["-O2", "-g", "-fno-stack-protector", "-U_FORTIFY_SOURCE", "-no-pie", "-Wl,-z,norelro", "-Wl,-z,lazy",
         "-Wl,--build-id=none"],
    )  # fmt: skip
    verdicts = hardening.judge(hardening.read_elf(program), [])
    print(verdicts)
    assert all(v.startswith("NO") for v in verdicts.values()), verdicts


def test_the_table_has_a_row_per_elf_file_and_a_column_per_property() -> None:
    good = {p: "yes" for p in hardening.PROPERTIES}
    bad = dict(good, stripped="NO: has .symtab")
    reports = [
        hardening.ElfReport("gdrcopy-2.6.1-1.el8.x86_64.rpm", "/usr/bin/gdrcopy_sanity", good),
        hardening.ElfReport("gdrcopy-2.6.1-1.el8.x86_64.rpm", "/usr/lib64/libgdrapi.so.2.6.1", bad),
    ]
    text = hardening.table(reports)
    print(text)
    lines = text.splitlines()
    assert lines[0].split() == ["package", "ELF", *hardening.PROPERTIES] and len(lines) == 4
    assert lines[3].split()[-2:] == ["NO", "yes"]
    assert hardening.misses(reports) == [
        "gdrcopy-2.6.1-1.el8.x86_64.rpm: /usr/lib64/libgdrapi.so.2.6.1: stripped NO: has .symtab"
    ]


def test_lint_lines_are_told_apart_by_severity_and_package() -> None:
    assert pipeline.lint_line_of("W: libgdrapi: some-tag usr/lib/x", "libgdrapi") == "W"
    assert pipeline.lint_line_of("E: libgdrapi: some-tag", "libgdrapi") == "E"
    assert pipeline.lint_line_of("W: libgdrapi-dbgsym: some-tag", "libgdrapi") == ""
    assert pipeline.lint_line_of("gdrcopy.x86_64: W: invalid-license MIT", "gdrcopy") == "W"
    assert pipeline.lint_line_of("gdrcopy-devel.x86_64: W: no-documentation", "gdrcopy") == ""
    assert pipeline.lint_line_of("I: libgdrapi: info-tag", "libgdrapi") == ""
    assert pipeline.lint_severity("4 packages and 0 specfiles checked; 0 errors, 0 warnings") == ""
