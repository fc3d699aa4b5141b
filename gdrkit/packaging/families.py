"""What differs between distribution families, in one typed registry.

One frozen dataclass per family; defining a subclass registers it (through
`__init_subclass__`), so adding a family is adding one class here.  Nothing
else in gdrkit hard-codes a distribution path, package name or image.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar


@dataclass(frozen=True)
class Layout:
    """Where a release installs what lives below /lib or /usr/lib."""

    unitdir: str
    udevrulesdir: str
    modprobedir: str
    # Holds one <kver>/ directory per kernel.
    modulesdir: str


# Debian before the /usr-merge completed (bullseye, bookworm, Ubuntu 22.04):
# files stay under /lib, where dpkg expects them (moving them is what the
# bookworm moratorium forbids) and where bookworm's lintian wants units.
SPLIT_LIB_LAYOUT = Layout("/lib/systemd/system", "/lib/udev/rules.d", "/lib/modprobe.d", "/lib/modules")
# Debian from trixie on, Ubuntu from 24.04 on: /lib is only an alias of
# /usr/lib, and lintian flags every path through it (aliased-location).
USR_LIB_LAYOUT = Layout("/usr/lib/systemd/system", "/usr/lib/udev/rules.d", "/usr/lib/modprobe.d", "/usr/lib/modules")
# RPM distributions moved units, rules and modprobe.d under /usr long ago;
# their kernel packages still own /lib/modules.
RPM_LAYOUT = Layout("/usr/lib/systemd/system", "/usr/lib/udev/rules.d", "/usr/lib/modprobe.d", "/lib/modules")


@dataclass(frozen=True)
class DebianRelease:
    """A Debian or Ubuntu release that .deb packages are built for."""

    os_id: str  # /etc/os-release ID: "debian" or "ubuntu"
    codename: str  # "trixie", "noble"; the suite a build is for
    version: str  # VERSION_ID: "13", "24.04"; "" for sid, which has none

    @property
    def usr_merged(self) -> bool:
        """Whether its packages must install below /usr/lib (see USR_LIB_SINCE)."""
        if not self.version:
            return True  # sid (and testing): newer than every numbered release
        return _version_key(self.version) >= _version_key(USR_LIB_SINCE[self.os_id])

    @property
    def layout(self) -> Layout:
        return USR_LIB_LAYOUT if self.usr_merged else SPLIT_LIB_LAYOUT


# The one place that says which releases take /usr/lib paths: the first
# release of each distribution whose lintian flags /lib (aliased-location).
USR_LIB_SINCE = {"debian": "13", "ubuntu": "24.04"}

# The releases a build can be asked for by name (build-deb --suite).
DEBIAN_RELEASES: dict[str, DebianRelease] = {
    release.codename: release
    for release in (
        DebianRelease("debian", "bullseye", "11"),
        DebianRelease("debian", "bookworm", "12"),
        DebianRelease("debian", "trixie", "13"),
        DebianRelease("debian", "forky", "14"),
        DebianRelease("debian", "sid", ""),
        DebianRelease("ubuntu", "jammy", "22.04"),
        DebianRelease("ubuntu", "noble", "24.04"),
    )
}
# The build host the README documents (Debian 12): what a Debian family
# built without naming a release (unit tests, the bookworm scenarios) is for.
DEFAULT_DEBIAN_RELEASE = DEBIAN_RELEASES["bookworm"]


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version))


@dataclass(frozen=True)
class Family:
    """A distribution family: how its packages are built and where files go."""

    name: ClassVar[str]
    # /etc/os-release ID (or ID_LIKE) values that belong to this family.
    os_ids: ClassVar[tuple[str, ...]]
    package_type: ClassVar[str]  # "deb" or "rpm"
    # Base image of a build/test container of this family.
    container_image: ClassVar[str]
    # Packages a build host of this family needs (its own package names).
    build_deps: ClassVar[tuple[str, ...]]
    # Package that holds the headers of kernel `{kver}`.
    kernel_headers_package: ClassVar[str]
    libdir: ClassVar[str]
    bindir: ClassVar[str] = "/usr/bin"
    includedir: ClassVar[str] = "/usr/include"
    docdir: ClassVar[str] = "/usr/share/doc"
    licensedir: ClassVar[str] = "/usr/share/licenses"
    # Where the gdrcopy Python module goes, and the package relation naming
    # the Python it is installed for (the module needs 3.8 or later).
    pythondir: ClassVar[str]
    python_requires: ClassVar[str]
    modprobe: ClassVar[str]
    # Where DKMS installs modules under <modulesdir>/<kver> on this family.
    dkms_module_location: ClassVar[str]
    # Where a prebuilt module package puts gdrdrv.ko under <modulesdir>/<kver>.
    kmod_module_location: ClassVar[str]
    # Packages of the NVIDIA driver built by DKMS: a change of them must
    # rebuild gdrdrv against the new nvidia_p2p_* symbols (rpm triggers).
    nvidia_dkms_packages: ClassVar[tuple[str, ...]] = ()
    # Rendered build files: template name -> path inside the build tree.
    templates: ClassVar[Mapping[str, str]]

    registry: ClassVar[dict[str, type[Family]]] = {}

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        Family.registry[cls.name] = cls

    @property
    def layout(self) -> Layout:
        """Where units, udev rules, modprobe.d files and modules go."""
        raise NotImplementedError(f"family {self.name} names no Layout")

    @property
    def unitdir(self) -> str:
        return self.layout.unitdir

    @property
    def udevrulesdir(self) -> str:
        return self.layout.udevrulesdir

    @property
    def modprobedir(self) -> str:
        return self.layout.modprobedir

    @property
    def modulesdir(self) -> str:
        return self.layout.modulesdir

    def paths(self) -> dict[str, str]:
        """The directory placeholders of packages/gdrcopy.yaml for this family."""
        return {
            "libdir": self.libdir,
            "bindir": self.bindir,
            "includedir": self.includedir,
            "docdir": self.docdir,
            "licensedir": self.licensedir,
            "unitdir": self.unitdir,
            "udevrulesdir": self.udevrulesdir,
            "modprobedir": self.modprobedir,
            "modulesdir": self.modulesdir,
            "pythondir": self.pythondir,
            "python_requires": self.python_requires,
        }


@dataclass(frozen=True)
class DebianFamily(Family):
    """Debian and Ubuntu; where files go depends on the release built for."""

    release: DebianRelease = DEFAULT_DEBIAN_RELEASE

    name = "debian"
    os_ids = ("debian", "ubuntu")
    package_type = "deb"
    container_image = "debian:bookworm"
    build_deps = (
        "build-essential",
        "debhelper",
        "dkms",
        "fakeroot",
        "strip-nondeterminism",
        "dh-strip-nondeterminism",
        "git",
        "kmod",
        # python3-gdrcopy: dh_python3 byte-compiles on install and adds the python3 dependency.
        "dh-python",
        "python3",
    )
    # What a Debian host needs besides build_deps: per package kind, to build and to lint
    # (bullseye has no rpmlint, so a deb build must not ask for it).
    kind_build_deps: ClassVar[Mapping[str, tuple[str, ...]]] = {"deb": (), "rpm": ("rpm",)}
    kind_lint_deps: ClassVar[Mapping[str, tuple[str, ...]]] = {"deb": ("lintian",), "rpm": ("rpmlint",)}
    kernel_headers_package = "linux-headers-{kver}"
    # debhelper substitutes the multiarch triplet in .install files.
    libdir = "/usr/lib/${DEB_HOST_MULTIARCH}"
    # Debian's one directory for every Python 3; dh_python3 adds the python3 dependency.
    pythondir = "/usr/lib/python3/dist-packages"
    python_requires = "python3 (>= 3.8)"
    modprobe = "/sbin/modprobe"
    dkms_module_location = "/updates/dkms"
    kmod_module_location = "/updates"
    templates = {
        "debian/control.j2": "debian/control",
        "debian/rules.j2": "debian/rules",
        "debian/changelog.j2": "debian/changelog",
        "debian/copyright.j2": "debian/copyright",
        "debian/source-format.j2": "debian/source/format",
    }

    @property
    def layout(self) -> Layout:
        return self.release.layout


@dataclass(frozen=True)
class RhelFamily(Family):
    name = "rhel"
    os_ids = ("rhel", "centos", "rocky", "almalinux", "fedora", "amzn", "ol")
    package_type = "rpm"
    container_image = "rockylinux:9"
    build_deps = ("gcc", "make", "rpm-build", "kernel-devel", "dkms")
    kernel_headers_package = "kernel-devel-uname-r = {kver}"
    libdir = "/usr/lib64"
    # The platform python of RHEL 9 and its rebuilds (noarch modules go under /usr/lib).
    pythondir = "/usr/lib/python3.9/site-packages"
    python_requires = "python(abi) = 3.9"
    modprobe = "/usr/sbin/modprobe"
    dkms_module_location = "/extra"
    kmod_module_location = "/extra"
    nvidia_dkms_packages = ("kmod-nvidia-latest-dkms", "kmod-nvidia-open-dkms")
    templates = {"rpm/gdrcopy.spec.j2": "gdrcopy.spec"}

    @property
    def layout(self) -> Layout:
        return RPM_LAYOUT


@dataclass(frozen=True)
class SuseFamily(Family):
    name = "suse"
    os_ids = ("sles", "opensuse-leap", "opensuse-tumbleweed", "suse", "opensuse")
    package_type = "rpm"
    container_image = "opensuse/leap:15.6"
    build_deps = ("gcc", "make", "rpm-build", "kernel-default-devel", "dkms")
    kernel_headers_package = "kernel-default-devel"
    libdir = "/usr/lib64"
    # Leap 15's python3 is 3.6, too old for the module: its Python 3.11 stack.
    pythondir = "/usr/lib/python3.11/site-packages"
    python_requires = "python311"
    # SUSE kernels refuse unsupported (out-of-tree) modules unless told.
    modprobe = "/usr/sbin/modprobe --allow-unsupported-modules"
    dkms_module_location = "/updates"
    kmod_module_location = "/updates"
    nvidia_dkms_packages = ("nvidia-open-driver-G06-signed-kmp-default",)
    templates = {"rpm/gdrcopy.spec.j2": "gdrcopy.spec"}

    @property
    def layout(self) -> Layout:
        return RPM_LAYOUT


def family(name: str) -> Family:
    """The family called `name`; dies with the known names if there is none."""
    try:
        return Family.registry[name]()
    except KeyError:
        from gdrkit.system import die

        raise die(
            f"unknown distribution family {name!r}",
            f"use one of: {', '.join(sorted(Family.registry))}",
        ) from None


def family_for_os_release(os_release: Mapping[str, str]) -> Family | None:
    """The family of a host described by its /etc/os-release fields, if known."""
    ids = [os_release.get("ID", "")] + os_release.get("ID_LIKE", "").split()
    for os_id in ids:
        for cls in Family.registry.values():
            if os_id in cls.os_ids:
                return cls()
    return None


def parse_os_release(text: str) -> dict[str, str]:
    """The fields of an /etc/os-release file's text (pure)."""
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and not key.startswith("#"):
            fields[key.strip()] = value.strip().strip("\"'")
    return fields


def debian_release(name: str) -> DebianRelease:
    """The release called `name` (a codename; "unstable" is sid); dies with the known names."""
    release = DEBIAN_RELEASES.get("sid" if name == "unstable" else name)
    if release is None:
        from gdrkit.system import die

        raise die(
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


def families_of_type(package_type: str) -> list[Family]:
    return [cls() for cls in Family.registry.values() if cls.package_type == package_type]
