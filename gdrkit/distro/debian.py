"""Debian and Ubuntu: the archive, its suites and the releases packages are built for.

The one list of Debian suites and mirrors: the VM roots (gdrkit.vm), the
container images (gdrkit.containers, gdrkit.matrix) and ci/matrix.yaml's
checks all read `SUITES` and `Suite.sources_lines()`, and all make their
roots with `mmdebstrap_command`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gdrkit.system import bad_input, die

MIRROR = "http://deb.debian.org/debian"
SECURITY_MIRROR = "http://security.debian.org/debian-security"


@dataclass(frozen=True)
class Suite:
    """One Debian suite of the archive: its name and which of its sections exist."""

    name: str
    release: int | None  # Debian major release; None for sid
    security: bool = True
    updates: bool = True
    backports: bool = True

    def sources_lines(self, components: Sequence[str] = ("main",)) -> list[str]:
        """The one-line apt sources that reach this suite's packages."""
        parts = " ".join(components)
        lines = [f"deb {MIRROR} {self.name} {parts}"]
        if self.updates:
            lines.append(f"deb {MIRROR} {self.name}-updates {parts}")
        if self.security:
            lines.append(f"deb {SECURITY_MIRROR} {self.name}-security {parts}")
        if self.backports:
            lines.append(f"deb {MIRROR} {self.name}-backports {parts}")
        return lines


# The suites whose roots and images are built here (mmdebstrap), in release order.
SUITES: dict[str, Suite] = {
    suite.name: suite
    for suite in (
        Suite("bullseye", 11, backports=False),  # bullseye-backports left the main archive
        Suite("bookworm", 12),
        Suite("trixie", 13),
        Suite("sid", None, security=False, updates=False, backports=False),
    )
}


def mmdebstrap_command(
    suite: Suite,
    target: str,
    include: Sequence[str],
    *,
    variant: str = "minbase",
    architecture: str = "",
    apt_options: Sequence[str] = (),
    dpkg_excludes: Sequence[str] = (),
    hooks: Sequence[str] = (),
) -> list[str]:
    """The one mmdebstrap command line: `suite`'s root into `target` (a directory or a tarball) (pure).

    The VM roots, the cross roots and the container images are all made by it.
    """
    argv = ["mmdebstrap", f"--variant={variant}"]
    if architecture:
        argv.append(f"--architectures={architecture}")
    argv.append(f"--include={','.join(include)}")
    argv += [f"--aptopt={option}" for option in apt_options]
    argv += [f"--dpkgopt=path-exclude={pattern}" for pattern in dpkg_excludes]
    argv += hooks
    return [*argv, suite.name, target, *suite.sources_lines()]


def suite(name: str) -> Suite:
    """The suite called `name`; dies with the known names if there is none."""
    found = SUITES.get(name)
    if found is None:
        raise die(f"unknown Debian suite {name!r}", f"use one of: {', '.join(SUITES)}")
    return found


@dataclass(frozen=True)
class DebianRelease:
    """A Debian or Ubuntu release that .deb packages are built for."""

    os_id: str  # /etc/os-release ID: "debian" or "ubuntu"
    codename: str  # "trixie", "noble"; the suite a build is for
    version: str  # VERSION_ID: "13", "24.04"; "" for sid, which has none
    # Its baseline (gdrkit.distro.targets): the glibc it ships, its default
    # python3; "" where not known (sid, a release newer than this table).
    glibc: str = ""
    python: str = ""
    # The Debian suite (of SUITES) whose root builds its packages: its own,
    # or for Ubuntu, whose archive is not reached from here, the Debian suite
    # whose glibc is not newer than its own (so what is linked there runs there).
    build_suite: str = ""
    # How the releases of its own kernels begin (`uname -r`, a regex): a
    # prebuilt module for it is built only for such a kernel, whose headers
    # package its archive has ("": not known, the archive decides).
    kernel_pattern: str = ""

    @property
    def usr_merged(self) -> bool:
        """Whether its packages must install below /usr/lib (see USR_LIB_SINCE)."""
        if not self.version:
            return True  # sid (and testing): newer than every numbered release
        return _version_key(self.version) >= _version_key(USR_LIB_SINCE[self.os_id])


# The one place that says which releases take /usr/lib paths: the first
# release of each distribution whose lintian flags /lib (aliased-location).
USR_LIB_SINCE = {"debian": "13", "ubuntu": "24.04"}

# The releases a build can be asked for by name (build-deb --suite): every
# Debian suite above plus forky and the Ubuntu LTS releases.  glibc and
# python3 as each release's libc6 and python3 packages ship them
# (jammy 2.35/3.10, noble 2.39/3.12; bullseye 2.31/3.9,
# bookworm 2.36/3.11, trixie 2.41/3.13).
DEBIAN_RELEASES: dict[str, DebianRelease] = {
    release.codename: release
    for release in (
        DebianRelease(
            "debian", "bullseye", "11", glibc="2.31", python="3.9", build_suite="bullseye",
            kernel_pattern=r"5\.10\.0-\d+-",
        ),
        DebianRelease(
            "debian", "bookworm", "12", glibc="2.36", python="3.11", build_suite="bookworm",
            kernel_pattern=r"6\.1\.0-\d+-",
        ),
        DebianRelease(
            "debian", "trixie", "13", glibc="2.41", python="3.13", build_suite="trixie",
            kernel_pattern=r"6\.12\.\d+\+deb13-",
        ),
        DebianRelease("debian", "forky", "14"),
        DebianRelease("debian", "sid", "", build_suite="sid"),
        DebianRelease("ubuntu", "jammy", "22.04", glibc="2.35", python="3.10", build_suite="bullseye"),
        DebianRelease("ubuntu", "noble", "24.04", glibc="2.39", python="3.12", build_suite="bookworm"),
    )
}  # fmt: skip
# The build host the README documents (Debian 12): what a Debian family
# built without naming a release (unit tests, the bookworm scenarios) is for.
DEFAULT_DEBIAN_RELEASE = DEBIAN_RELEASES["bookworm"]


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version))


def debian_release(name: str) -> DebianRelease:
    """The release called `name` (a codename; "unstable" is sid); dies with the known names."""
    release = DEBIAN_RELEASES.get("sid" if name == "unstable" else name)
    if release is None:
        raise bad_input(
            f"unknown Debian or Ubuntu release {name!r}",
            f"use one of: {', '.join(DEBIAN_RELEASES)} (its codename, as in /etc/os-release VERSION_CODENAME)",
        )
    return release


def debian_release_for_os_release(os_release: Mapping[str, str]) -> DebianRelease | None:
    """The Debian or Ubuntu release of a host described by its /etc/os-release fields, if it is one.

    A derivative (Mint, Pop!_OS) counts as the release it is built on, which
    its UBUNTU_CODENAME or DEBIAN_CODENAME names; its own version is not Debian's.
    """
    for key in ("UBUNTU_CODENAME", "DEBIAN_CODENAME", "VERSION_CODENAME"):
        known = DEBIAN_RELEASES.get(os_release.get(key, ""))
        if known is not None:
            return known
    os_id = os_release.get("ID", "")
    if os_id not in USR_LIB_SINCE:
        return None
    # A release newer than this table: its own version decides (none: testing or sid).
    return DebianRelease(os_id, os_release.get("VERSION_CODENAME", ""), os_release.get("VERSION_ID", ""))
