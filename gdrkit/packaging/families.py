"""What differs between distribution families, in one typed registry.

One frozen dataclass per family; defining a subclass registers it (through
`__init_subclass__`), so adding a family is adding one class here.  Nothing
else in gdrkit hard-codes a distribution path, package name or image.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar


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
    unitdir: ClassVar[str]
    udevrulesdir: ClassVar[str]
    modprobedir: ClassVar[str]
    modprobe: ClassVar[str]
    # Where DKMS installs modules under /lib/modules/<kver> on this family.
    dkms_module_location: ClassVar[str]
    # Where a prebuilt module package puts gdrdrv.ko under /lib/modules/<kver>.
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
        }


@dataclass(frozen=True)
class DebianFamily(Family):
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
    )
    # What a Debian host needs besides build_deps: per package kind, to build and to lint
    # (bullseye has no rpmlint, so a deb build must not ask for it).
    kind_build_deps: ClassVar[Mapping[str, tuple[str, ...]]] = {"deb": (), "rpm": ("rpm",)}
    kind_lint_deps: ClassVar[Mapping[str, tuple[str, ...]]] = {"deb": ("lintian",), "rpm": ("rpmlint",)}
    kernel_headers_package = "linux-headers-{kver}"
    # debhelper substitutes the multiarch triplet in .install files.
    libdir = "/usr/lib/${DEB_HOST_MULTIARCH}"
    # bookworm keeps these under /lib (usrmerge moves are not allowed yet).
    unitdir = "/lib/systemd/system"
    udevrulesdir = "/lib/udev/rules.d"
    modprobedir = "/lib/modprobe.d"
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


@dataclass(frozen=True)
class RhelFamily(Family):
    name = "rhel"
    os_ids = ("rhel", "centos", "rocky", "almalinux", "fedora", "amzn", "ol")
    package_type = "rpm"
    container_image = "rockylinux:9"
    build_deps = ("gcc", "make", "rpm-build", "kernel-devel", "dkms")
    kernel_headers_package = "kernel-devel-uname-r = {kver}"
    libdir = "/usr/lib64"
    unitdir = "/usr/lib/systemd/system"
    udevrulesdir = "/usr/lib/udev/rules.d"
    modprobedir = "/usr/lib/modprobe.d"
    modprobe = "/usr/sbin/modprobe"
    dkms_module_location = "/extra"
    kmod_module_location = "/extra"
    nvidia_dkms_packages = ("kmod-nvidia-latest-dkms", "kmod-nvidia-open-dkms")
    templates = {"rpm/gdrcopy.spec.j2": "gdrcopy.spec"}


@dataclass(frozen=True)
class SuseFamily(Family):
    name = "suse"
    os_ids = ("sles", "opensuse-leap", "opensuse-tumbleweed", "suse", "opensuse")
    package_type = "rpm"
    container_image = "opensuse/leap:15.6"
    build_deps = ("gcc", "make", "rpm-build", "kernel-default-devel", "dkms")
    kernel_headers_package = "kernel-default-devel"
    libdir = "/usr/lib64"
    unitdir = "/usr/lib/systemd/system"
    udevrulesdir = "/usr/lib/udev/rules.d"
    modprobedir = "/usr/lib/modprobe.d"
    # SUSE kernels refuse unsupported (out-of-tree) modules unless told.
    modprobe = "/usr/sbin/modprobe --allow-unsupported-modules"
    dkms_module_location = "/updates"
    kmod_module_location = "/updates"
    nvidia_dkms_packages = ("nvidia-open-driver-G06-signed-kmp-default",)
    templates = {"rpm/gdrcopy.spec.j2": "gdrcopy.spec"}


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


def families_of_type(package_type: str) -> list[Family]:
    return [cls() for cls in Family.registry.values() if cls.package_type == package_type]
