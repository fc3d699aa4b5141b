"""The version has one source, include/gdrcopy_version.h; everything derives from it."""

from gdrkit import version


def test_version_is_read_from_the_header() -> None:
    header = version.VERSION_HEADER.read_text()
    assert f"#define GDRCOPY_VERSION_MAJOR {version.MAJOR}\n" in header
    assert f"#define GDRCOPY_VERSION_MINOR {version.MINOR}\n" in header
    assert version.VERSION == f"{version.MAJOR}.{version.MINOR}.{version.PATCH}"


def test_interface_version_is_that_of_gdrcopy_2_6() -> None:
    # Drop-in compatibility: the library and driver must report 2.6.
    assert version.api_version() == "2.6"


# Every NVIDIA GDRCopy package version we replace, and NVIDIA's possible next ones.
NVIDIA_REPLACED = ["2.6-1", "2.5.2-1", "2.5.1-1", "2.5-1", "2.4.4-1", "2.4-1", "2.3.1-1", "2.2-1"]
NVIDIA_NEXT = ["2.6.1-1", "2.6.2-1", "2.7-1", "3.0-1"]
NVIDIA_RPM_REPLACED = ["2.6-1", "2.6-1dkms", "2.5.2-1dkms", "2.4.4-1"]


def _dpkg_compare(a: str, op: str, b: str) -> bool:
    from gdrkit.system import run

    return run(["dpkg", "--compare-versions", a, op, b], check=False).returncode == 0


def _rpm_compare(a: str, b: str) -> int:
    """rpm's own comparison of two version-release strings: -1, 0 or 1."""
    from gdrkit.system import ensure_debian_packages, run

    ensure_debian_packages(["rpm"])
    expression = f"%{{lua:print(rpm.vercmp('{a}', '{b}'))}}"
    return int(run(["rpm", "--eval", expression], capture=True).stdout.strip())


def test_the_package_version_can_never_be_an_nvidia_version_string() -> None:
    assert version.package_version("2.6.1") == "2.6+dropin1"
    assert version.package_version() == f"{version.MAJOR}.{version.MINOR}+dropin{version.PATCH}"
    ours = version.package_version() + "-1"
    # NVIDIA's are MAJOR.MINOR[.PATCH]-N: digits and dots only before the release.
    assert version.PACKAGE_MARK not in "".join(NVIDIA_REPLACED + NVIDIA_NEXT + NVIDIA_RPM_REPLACED)
    assert ours not in NVIDIA_REPLACED + NVIDIA_NEXT
    assert version.PACKAGE_MARK.startswith("+") and not any(c.isdigit() or c == "." for c in version.PACKAGE_MARK)


def test_our_packages_sort_above_what_they_replace_and_below_nvidias_next_release_deb_and_rpm() -> None:
    ours = version.package_version() + "-1"
    for theirs in NVIDIA_REPLACED:
        assert _dpkg_compare(ours, "gt", theirs), f"dpkg: {ours} must upgrade NVIDIA's {theirs}"
    for theirs in NVIDIA_NEXT:
        assert _dpkg_compare(ours, "lt", theirs), f"dpkg: NVIDIA's {theirs} must upgrade {ours}"
    for theirs in NVIDIA_RPM_REPLACED:
        assert _rpm_compare(ours, theirs) == 1, f"rpm: {ours} must upgrade NVIDIA's {theirs}"
    for theirs in NVIDIA_NEXT:
        assert _rpm_compare(ours, theirs) == -1, f"rpm: NVIDIA's {theirs} must upgrade {ours}"
    # Our own releases keep their order: 2.6.0 < 2.6.1 < 2.6.2 < 2.6.10.
    chain = [version.package_version(f"2.6.{patch}") + "-1" for patch in (0, 1, 2, 10)]
    for older, newer in zip(chain, chain[1:], strict=False):
        assert _dpkg_compare(older, "lt", newer) and _rpm_compare(older, newer) == -1


def test_the_scenario_scripts_version_our_debs_by_the_same_rule() -> None:
    from gdrkit.system import run

    lib = version.REPO_ROOT / "tests" / "packaging" / "lib.sh"
    for release in ("2.6.1", "2.6.0", "2.7.12"):
        result = run(["bash", "-c", f'. "{lib}"; deb_version {release}'], capture=True)
        assert result.stdout.strip() == version.package_version(release) + "-1"
        back = run(["bash", "-c", f'. "{lib}"; release_of_deb_version {result.stdout.strip()}'], capture=True)
        assert back.stdout.strip() == release  # what DKMS and the module call it
    # NVIDIA's 2.6 (the stand-in's) is versioned as NVIDIA does.
    assert run(["bash", "-c", f'. "{lib}"; deb_version 2.6'], capture=True).stdout.strip() == "2.6-1"


def test_the_symbols_files_minimum_versions_are_ones_our_package_satisfies() -> None:
    # dpkg-shlibdeps writes these into a consumer's Depends: a minimum above our
    # package version (2.6.1 > 2.6+dropin1) could only be met by NVIDIA's next
    # release, which lacks the symbols, and dpkg-gensymbols caps it to the current
    # version with its revision (lintian: symbols-file-contains-current-version-...).
    symbols = (version.REPO_ROOT / "libgdrapi" / "libgdrapi.symbols").read_text().splitlines()
    minimums = {line.split()[-1] for line in symbols[1:] if line.startswith(" ")}
    assert minimums, "libgdrapi.symbols lists no symbols"
    for minimum in minimums:
        assert "-" not in minimum, f"{minimum}: a symbols file names upstream versions, not Debian revisions"
        assert _dpkg_compare(minimum, "le", version.package_version()), (
            f"libgdrapi.symbols asks for {minimum}, above our package version {version.package_version()}"
        )
