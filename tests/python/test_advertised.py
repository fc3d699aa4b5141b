"""The releases people are told about are the releases built and published (quick; issue 36).

One list, gdrkit.distro.targets.CLAIMED: `build-packages --targets all`
builds each of its releases into dist/<release>/, which `publish` turns into
that release's .sources or .repo file.  README, docs/install.md and the
Ansible role (its README and meta/main.yml) name exactly those releases; and
README says which families were installed and booted here and which only
built and checked.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from gdrkit.distro import targets
from gdrkit.distro.debian import DEBIAN_RELEASES
from gdrkit.matrix import model as matrix
from gdrkit.version import REPO_ROOT

PAGES = [
    REPO_ROOT / "README.md",
    *sorted((REPO_ROOT / "docs").glob("*.md")),
    REPO_ROOT / "packages" / "README.md",
    REPO_ROOT / "ansible" / "roles" / "gdrcopy" / "README.md",
]
# A list of releases as the pages write them: "Debian 11/12/13", "Ubuntu 22.04/24.04", "RHEL ... 8/9/10".
LISTS = {
    "debian": re.compile(r"\bDebian ((?:\d+/)+\d+)\b"),
    "ubuntu": re.compile(r"\bUbuntu ((?:\d+\.\d+/)+\d+\.\d+)\b"),
    "rhel": re.compile(r"\b(?:RHEL|Oracle Linux) ((?:\d+/)+\d+)\b"),
}


def _rel(path: Path) -> str:
    return str(path.relative_to(REPO_ROOT))


def test_every_release_list_in_the_docs_is_the_claimed_one() -> None:
    advertised = targets.advertised()
    claimed = targets.claimed_releases()
    want = {
        "debian": "/".join(DEBIAN_RELEASES[n].version for n in claimed["debian"]),
        "ubuntu": "/".join(DEBIAN_RELEASES[n].version for n in claimed["ubuntu"]),
        "rhel": advertised["rhel"],
    }
    print(advertised)
    seen = []
    for page in PAGES:
        for number, line in enumerate(page.read_text().splitlines(), 1):
            for key, pattern in LISTS.items():
                for found in pattern.findall(line):
                    seen.append((_rel(page), number, key, found))
                    assert found == want[key], f"{_rel(page)}:{number}: {key} {found}, but the claimed are {want[key]}"
    where = {(p, k) for p, _, k, _ in seen}
    # The install blocks and headings name every family's list.
    assert {("README.md", "debian"), ("README.md", "ubuntu"), ("README.md", "rhel")} <= where, seen
    assert {("docs/install.md", "debian"), ("docs/install.md", "rhel")} <= where, seen
    readme = (REPO_ROOT / "README.md").read_text()
    assert f"\n{advertised['deb']}:\n" in readme
    assert f"Oracle Linux {advertised['rhel']} (" in readme
    assert f"SUSE Linux Enterprise {advertised['suse']} and openSUSE Leap {advertised['suse']}" in readme


def test_no_page_names_an_ubuntu_release_that_is_not_built_as_installable() -> None:
    ubuntu = {DEBIAN_RELEASES[n].version for n in targets.claimed_releases()["ubuntu"]}
    for page in PAGES:
        for number, line in enumerate(page.read_text().splitlines(), 1):
            for version in re.findall(r"\bUbuntu (\d\d\.\d\d)\b", line):
                if version not in ubuntu:
                    assert "not built" in line or "is not built" in page.read_text().splitlines()[number - 1], (
                        f"{_rel(page)}:{number}: Ubuntu {version} is named but not built"
                    )


def test_the_roles_platforms_are_the_claimed_releases() -> None:
    meta = yaml.safe_load((REPO_ROOT / "ansible" / "roles" / "gdrcopy" / "meta" / "main.yml").read_text())
    platforms = {p["name"]: [str(v) for v in p["versions"]] for p in meta["galaxy_info"]["platforms"]}
    want = {p["name"]: p["versions"] for p in targets.galaxy_platforms()}
    print(platforms)
    assert platforms == want


def test_each_claimed_release_is_built_by_targets_all_and_published_under_its_name() -> None:
    from gdrkit.publish import repo

    built = {t.release for t in targets.targets("all")}
    claimed = targets.claimed_releases()
    assert {n for key in ("debian", "ubuntu") for n in claimed[key]} <= built
    assert {f"el{m}" for m in claimed["rhel"]} | {f"sle{m}" for m in claimed["suse"]} <= built
    # What publish writes for each: a .sources file per Debian/Ubuntu release, a .repo file per RPM release.
    for name in built:
        if name in DEBIAN_RELEASES:
            assert f"Suites: {name}" in repo.sources_file("https://pkgs.example.org/gdrcopy", name, "KEY"), name
        else:
            assert f"/rpm/{name}" in repo.repo_file("https://pkgs.example.org/gdrcopy", name), name


def test_readme_says_which_families_were_booted_here_and_which_only_built() -> None:
    entries = matrix.load()
    here = {e.target.family_name for e in entries if e.target and not e.needs_registry and e.boot}
    elsewhere = {e.family for e in entries if e.needs_registry}
    assert here == {"debian"}, here
    line = next(line for line in (REPO_ROOT / "README.md").read_text().splitlines() if line.startswith("Tried here:"))
    booted, built = line.split(";", 1)
    assert "Debian" in booted and "installed and booted" in booted
    for name in ("Ubuntu", "RHEL", "SLE"):
        assert name in built, name
    assert "built and checked by their ELF files and baseline" in built
    assert elsewhere >= {"rhel", "suse"}, elsewhere
