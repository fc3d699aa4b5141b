"""docs/install.md: each family's block is shell that parses, and fetches the
files that `./toolkit publish` writes under the names it writes them (issue 24)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from gdrkit.publish import repo
from gdrkit.version import REPO_ROOT

DOC = REPO_ROOT / "docs" / "install.md"
BLOCK = re.compile(r"^## (?P<title>.+?)\n(?P<body>.*?)(?=^## |\Z)", re.S | re.M)
SH = re.compile(r"```sh\n(.*?)```", re.S)


def _family_blocks() -> dict[str, str]:
    """The first sh block of each family's section, by the section's first word."""
    blocks = {}
    for section in BLOCK.finditer(DOC.read_text()):
        code = SH.search(section["body"])
        if code:
            blocks[section["title"].split()[0].rstrip(",")] = code[1]
    return blocks


def test_there_is_a_block_per_family() -> None:
    assert {"Debian", "RHEL", "SUSE"} <= set(_family_blocks())


@pytest.mark.parametrize("family", ["Debian", "RHEL", "SUSE"])
def test_each_block_is_shell_that_parses(family: str, tmp_path: Path) -> None:
    script = tmp_path / "block.sh"
    script.write_text("#!/bin/sh\n" + _family_blocks()[family])
    subprocess.run(["bash", "-n", str(script)], check=True)
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.skip("shellcheck is not installed (apt-get install shellcheck); bash -n passed")
    # SC1091: /etc/os-release is the node's, not here to follow.
    subprocess.run([shellcheck, "-s", "sh", "-e", "SC1091", str(script)], check=True)


@pytest.mark.parametrize(
    ("family", "variables", "written"),
    [
        ("Debian", {"CODENAME": "bookworm"}, [f"apt/{repo.PACKAGE}-bookworm.sources", repo.KEY_FILE]),
        ("RHEL", {"EL": "9"}, [f"rpm/{repo.PACKAGE}-el9.repo", repo.KEY_FILE]),
        ("SUSE", {}, [f"rpm/{repo.PACKAGE}-sle15.repo", repo.KEY_FILE]),
    ],
)
def test_the_blocks_fetch_what_publish_writes(family: str, variables: dict[str, str], written: list[str]) -> None:
    block = _family_blocks()[family]
    for name, value in variables.items():
        block = block.replace(f"${name}", value)
    fetched = set(re.findall(r'"\$REPO/([^"]+)"', block))
    # publish writes the key at the top and one .sources/.repo file per release (gdrkit/publish/repo.py).
    assert fetched == set(written), fetched
