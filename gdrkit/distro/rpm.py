"""The RPM releases packages are built for: each one's glibc, Python, dist tag and dkms source.

The numbers are those of the releases' own packages: glibc 2.28 (EL8),
2.34 (EL9), 2.39 (EL10) and 2.31 (SLE 15 from SP3 on, and Leap 15.3 on,
which ship SLE's glibc; SP2 and older had 2.26 and are out of support).
The default python3 is 3.6 on EL8 and SLE 15, too old for the gdrcopy
module (3.8 or later): there the packages name the newer Python each
release ships beside it (EL8 AppStream's python3.11 since 8.8; SLE 15's
python311 since SP4, Leap 15.4).
"""

from __future__ import annotations

from dataclasses import dataclass

from gdrkit.system import die


@dataclass(frozen=True)
class PythonRuntime:
    """The Python that python3-gdrcopy and gdrcopy_doctor are installed for on a release."""

    version: str  # "3.11"
    requires: str  # the package relation that pulls it in
    sitedir: str  # where the gdrcopy module goes
    interpreter: str  # what runs gdrcopy_doctor
    package: str  # what a person installs to have it


def fedora_python(version: str, *, default: bool) -> PythonRuntime:
    """A Python of RHEL and its rebuilds: the default one is python3, the others python3.X (pure)."""
    return PythonRuntime(
        version=version,
        requires=f"python(abi) = {version}",
        sitedir=f"/usr/lib/python{version}/site-packages",
        interpreter="/usr/bin/python3" if default else f"/usr/bin/python{version}",
        package="python3" if default else f"python{version}",
    )


# Debian and Ubuntu: one directory for every Python 3; dh_python3 adds the python3 dependency.
DEBIAN_PYTHON = PythonRuntime(
    version="3",
    requires="python3 (>= 3.8)",
    sitedir="/usr/lib/python3/dist-packages",
    interpreter="/usr/bin/python3",
    package="python3",
)
SUSE_PYTHON311 = PythonRuntime(
    version="3.11",
    requires="python311",
    sitedir="/usr/lib/python3.11/site-packages",
    interpreter="/usr/bin/python3.11",
    package="python311",
)


@dataclass(frozen=True)
class RpmRelease:
    """One release of an RPM family that packages are built for."""

    name: str  # el9, sle15: the dist tag without its dot, and the publish repository's name
    family: str  # rhel, suse (gdrkit.distro.families)
    glibc: str
    default_python: str  # the release's python3
    python: PythonRuntime  # what our Python parts are installed for
    dkms_from: str  # where a node gets dkms

    @property
    def dist_tag(self) -> str:
        """What rpm's %{?dist} expands to: the release part of the file name (gdrcopy-2.6.1-1.el8.x86_64.rpm)."""
        return f".{self.name}"


RPM_RELEASES: dict[str, RpmRelease] = {
    release.name: release
    for release in (
        RpmRelease(
            "el8", "rhel", glibc="2.28", default_python="3.6",
            python=fedora_python("3.11", default=False),
            dkms_from="EPEL 8 (dnf install epel-release; on RHEL also enable codeready-builder)",
        ),
        RpmRelease(
            "el9", "rhel", glibc="2.34", default_python="3.9",
            python=fedora_python("3.9", default=True),
            dkms_from="EPEL 9 (dnf install epel-release; on RHEL also enable codeready-builder)",
        ),
        RpmRelease(
            "el10", "rhel", glibc="2.39", default_python="3.12",
            python=fedora_python("3.12", default=True),
            dkms_from="EPEL 10 (dnf install epel-release)",
        ),
        RpmRelease(
            "sle15", "suse", glibc="2.31", default_python="3.6",
            python=SUSE_PYTHON311,
            dkms_from="SLE: SUSE Package Hub 15 (SUSEConnect -p PackageHub/15.X/<arch>); Leap 15: its main repository",
        ),
    )
}  # fmt: skip
# What a family builds for when no release is named (--family rhel / suse).
DEFAULT_RPM_RELEASE = {"rhel": "el9", "suse": "sle15"}


def rpm_release(name: str) -> RpmRelease:
    """The RPM release called `name` (el8, el9, el10, sle15); dies with the known names."""
    found = RPM_RELEASES.get(name.strip().lower())
    if found is None:
        raise die(f"unknown RPM release {name!r}", f"use one of: {', '.join(RPM_RELEASES)}")
    return found


def release_of_major(family_name: str, major: str) -> str:
    """The release name of major release `major` of a family (rhel 8 -> el8, suse 15 -> sle15); "" if not known (pure)."""
    name = {"rhel": f"el{major}", "suse": f"sle{major}"}.get(family_name, "")
    return name if major and name in RPM_RELEASES else ""


def default_rpm_release(family_name: str) -> RpmRelease:
    """The release a family's packages are for when none is named."""
    name = DEFAULT_RPM_RELEASE.get(family_name)
    if name is None:
        raise die(f"no RPM release is known for family {family_name!r}", f"use one of: {', '.join(RPM_RELEASES)}")
    return RPM_RELEASES[name]
