"""Build targets: (family, release, arch), and the baseline each one's packages must meet.

A target's baseline is its release's: the glibc its ELF files may need at
most, the Python its Python parts are installed for, where dkms comes from,
its unit/udev/modprobe directories and how its package files are told apart
(an RPM dist tag; a Debian release's own directory under dist/, as
`publish` reads them).  `build-packages --targets` builds a list of them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gdrkit.distro.arch import arch
from gdrkit.distro.debian import DEBIAN_RELEASES
from gdrkit.distro.families import DebianFamily, Family, RpmFamily, rpm_family
from gdrkit.distro.rpm import RPM_RELEASES, PythonRuntime
from gdrkit.system import die

# Where dkms comes from on a Debian or Ubuntu node.
DEBIAN_DKMS_FROM = "the release's main archive (apt install dkms)"


@dataclass(frozen=True)
class Target:
    """One (family, release, arch) that packages are built for."""

    family_name: str  # debian, rhel, suse
    release: str  # bookworm, el8, sle15
    arch: str  # Debian's spelling: amd64, arm64
    # The family set to that release, where it is not one of the tables' (a
    # Debian release named only by a host's /etc/os-release).
    known_family: Family | None = field(default=None, compare=False, repr=False)

    @property
    def name(self) -> str:
        """How --targets names it: the release, with -arm64 for the other architecture."""
        return self.release if self.arch == "amd64" else f"{self.release}-{self.arch}"

    @property
    def family(self) -> Family:
        if self.known_family is not None:
            return self.known_family
        if self.family_name == "debian":
            return DebianFamily(release=DEBIAN_RELEASES[self.release])
        return rpm_family(self.release)

    @property
    def package_type(self) -> str:
        return self.family.package_type

    @property
    def glibc(self) -> str:
        return self.family.glibc

    @property
    def python(self) -> PythonRuntime:
        return self.family.python

    @property
    def default_python(self) -> str:
        """The release's python3 ("" where not known)."""
        fam = self.family
        if isinstance(fam, DebianFamily):
            return fam.release.python
        assert isinstance(fam, RpmFamily)
        return fam.target_release.default_python

    @property
    def dkms_from(self) -> str:
        fam = self.family
        return fam.target_release.dkms_from if isinstance(fam, RpmFamily) else DEBIAN_DKMS_FROM

    @property
    def dist_tag(self) -> str:
        """The RPM release suffix (.el8); "" for .deb packages, which dist/<release>/ keeps apart."""
        fam = self.family
        return fam.target_release.dist_tag if isinstance(fam, RpmFamily) else ""


# The targets the packages are claimed for: NVIDIA's (RHEL 8/9, Ubuntu 22.04,
# SLE 15 and Leap 15, x86_64 and arm64) and those this project adds (EL10,
# Debian 11-13, Ubuntu 24.04).  Debian's arm64 packages are cross-built with
# this host's cross toolchain (gdrkit.packaging), so only releases whose
# glibc is not older than this host's (Debian 12) get them.
CLAIMED: tuple[Target, ...] = (
    *(Target(RPM_RELEASES[r].family, r, a) for r in ("el8", "el9", "el10", "sle15") for a in ("amd64", "arm64")),
    *(Target("debian", r, "amd64") for r in ("bullseye", "bookworm", "trixie", "jammy", "noble")),
    *(Target("debian", r, "arm64") for r in ("bookworm", "trixie", "noble")),
)
BY_NAME = {target.name: target for target in CLAIMED}


def targets(spec: str) -> list[Target]:
    """The targets a --targets value names: `all`, or comma-separated names (el8, el9-arm64, bookworm)."""
    names = [part.strip() for part in spec.split(",") if part.strip()]
    if names == ["all"]:
        return list(CLAIMED)
    unknown = [n for n in names if n not in BY_NAME]
    if unknown or not names:
        raise die(
            f"unknown target(s): {', '.join(unknown) or '(none named)'}",
            f"use `all` or some of: {', '.join(BY_NAME)}",
        )
    return [BY_NAME[n] for n in dict.fromkeys(names)]


def target_for(family: Family, arch_name: str = "") -> Target:
    """The target a family set to its release builds for, on `arch_name` (default: amd64)."""
    return Target(family.name, family.release_name, arch(arch_name or "amd64").debian, family)


def oldest_glibc(arch_name: str = "amd64") -> str:
    """The oldest glibc among the claimed targets on `arch_name` (2.28, RHEL 8's): a binary linked
    against it runs on every one of them, as a manylinux wheel must."""
    debian_name = arch(arch_name).debian
    found = [target.glibc for target in CLAIMED if target.arch == debian_name and target.glibc]
    if not found:
        raise die(f"no claimed target on {debian_name} names its glibc", "add the release's glibc to gdrkit/distro")
    return min(found, key=lambda version: tuple(int(part) for part in re.findall(r"\d+", version)))


# ---- the claimed releases as people read them: README, docs/install.md, the Ansible role ----

# The Ansible Galaxy platform name of each family's releases (meta/main.yml):
# openSUSE Leap 15 ships SLE 15's packages, and Galaxy has no Leap 15 to name.
GALAXY_NAMES = {"debian": "Debian", "ubuntu": "Ubuntu", "rhel": "EL", "suse": "SLES"}


def claimed_releases() -> dict[str, list[str]]:
    """Each distribution's claimed releases, in CLAIMED's order: debian/ubuntu by codename, rhel/suse by major (pure)."""
    found: dict[str, list[str]] = {}
    for target in CLAIMED:
        if target.family_name == "debian":
            release = DEBIAN_RELEASES[target.release]
            key, name = release.os_id, release.codename
        else:
            key, name = target.family_name, re.sub(r"\D", "", target.release)
        names = found.setdefault(key, [])
        if name not in names:
            names.append(name)
    return found


def advertised() -> dict[str, str]:
    """How README and docs/install.md name each family's claimed releases (pure):
    "Debian 11/12/13, Ubuntu 22.04/24.04", "8/9/10", "15"."""
    claimed = claimed_releases()

    def versions(os_id: str) -> str:
        numbers = [DEBIAN_RELEASES[name].version for name in claimed.get(os_id, [])]
        # Debian by its major release (11), Ubuntu by its full one (22.04).
        return "/".join(n.split(".")[0] if os_id == "debian" else n for n in numbers)

    return {
        "deb": f"Debian {versions('debian')}, Ubuntu {versions('ubuntu')}",
        "rhel": "/".join(claimed["rhel"]),
        "suse": "/".join(claimed["suse"]),
    }


def galaxy_platforms() -> list[dict[str, object]]:
    """The Ansible role's meta/main.yml `platforms`: the claimed releases as Galaxy names them (pure)."""
    return [{"name": GALAXY_NAMES[key], "versions": names} for key, names in claimed_releases().items()]
