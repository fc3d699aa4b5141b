"""The README's install blocks, one per family: shell that parses, and fetches the
files that `./toolkit publish` writes under the names it writes them (issue 24).
docs/install.md says what they do and points to them."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from gdrkit.publish import repo
from gdrkit.system import ensure_debian_packages
from gdrkit.version import REPO_ROOT

README = REPO_ROOT / "README.md"
DOC = REPO_ROOT / "docs" / "install.md"
SECTION = re.compile(r"^## Install on GPU nodes\n(?P<body>.*?)(?=^## |\Z)", re.S | re.M)
# A family's block: the paragraph that names the family, then its sh block.
FAMILY_BLOCK = re.compile(r"^(?P<family>[A-Z]\w+)[^\n]*(?:\n[^\n]+)*\n\n```sh\n(?P<code>.*?)```", re.S | re.M)


def _family_blocks() -> dict[str, str]:
    """Each family's block in the README's install section, by the first word of the paragraph before it."""
    section = SECTION.search(README.read_text())
    assert section, "README.md has no '## Install on GPU nodes' section"
    return {m["family"]: m["code"] for m in FAMILY_BLOCK.finditer(section["body"])}


def test_the_guide_points_to_the_readme_blocks() -> None:
    assert DOC.read_text().count("../README.md#install-on-gpu-nodes") >= 3


def test_there_is_a_block_per_family() -> None:
    assert {"Debian", "RHEL", "SUSE"} <= set(_family_blocks())


@pytest.mark.parametrize("family", ["Debian", "RHEL", "SUSE"])
def test_each_block_is_shell_that_parses(family: str, tmp_path: Path) -> None:
    script = tmp_path / "block.sh"
    script.write_text("#!/bin/sh\n" + _family_blocks()[family])
    subprocess.run(["bash", "-n", str(script)], check=True)
    ensure_debian_packages(["shellcheck"])
    # SC1091: /etc/os-release is the node's, not here to follow.
    subprocess.run(["shellcheck", "-s", "sh", "-e", "SC1091", str(script)], check=True)


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


def test_the_suse_block_writes_the_roles_file_not_suses() -> None:
    # The role's file (vars/main.yml) sorts after SUSE's 10-unsupported-modules.conf, which stays SUSE's.
    role_vars = (REPO_ROOT / "ansible/roles/gdrcopy/vars/main.yml").read_text()
    conf = re.search(r"^gdrcopy_suse_unsupported_conf: (\S+)$", role_vars, re.M)
    assert conf, "ansible/roles/gdrcopy/vars/main.yml no longer sets gdrcopy_suse_unsupported_conf"
    written = re.findall(r">\s*(/etc/modprobe\.d/\S+)", _family_blocks()["SUSE"])
    assert written == [conf.group(1)], written
