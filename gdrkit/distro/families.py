"""What differs between distribution families, in one typed registry.

One frozen dataclass per family; defining a subclass registers it (through
`__init_subclass__`), so adding a family is adding one class here (and a
row in ci/matrix.yaml to test it).  Each family knows where its packages put
files, its package manager's verbs, the packages a build host and a matrix
image need, how to find its kernel headers, and what to tell a person to
install.  Nothing else in gdrkit names a package manager, a family or a
distribution path.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import ClassVar

from gdrkit.distro.debian import (
    DEFAULT_DEBIAN_RELEASE,
    DebianRelease,
    debian_release,
    debian_release_for_os_release,
)

from gdrkit.distro.rpm import DEBIAN_PYTHON, PythonRuntime, RpmRelease, default_rpm_release, rpm_release

# Shared with the packaged doctor, which runs without this registry (gdrkit.gdrcopy_doctor.facts).
from gdrkit.gdrcopy_doctor.facts import format_install_hint, parse_os_release

__all__ = [
    "DebianFamily",
    "KubeBases",
    "DebianRelease",
    "Family",
    "Layout",
    "RhelFamily",
    "RpmFamily",
    "SuseFamily",
    "debian_release",
    "debian_release_for_os_release",
    "families_of_type",
    "family",
    "family_for_os_release",
    "parse_os_release",
    "rpm_family",
]


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
# The RPM families' Kubernetes images (registry bases: UBI, SLE BCI): what
# the entrypoint calls besides bash and coreutils, which such a base may
# lack; and how our package files go in: without dependencies or scriptlets,
# since the DKMS package needs dkms (EPEL, which UBI does not reach) and its
# scriptlets would run DKMS, which an image never does (the entrypoint
# builds with make on the node).
RPM_KUBE_LOADER_PACKAGES = ("kmod", "findutils", "gawk", "grep", "sed")
RPM_KUBE_INSTALL_FILES = ("rpm", "--install", "--nodeps", "--noscripts")


@dataclass(frozen=True)
class KubeBases:
    """Where the Kubernetes images (gdrkit.kube) for nodes of one major release of an RPM family start.

    `{major}` and `{version}` (the node's VERSION_ID) are filled in.
    """

    # The images' own base: redistributable, and what the node's vendor
    # supports in containers (UBI, SLE BCI); it has no kernel-devel packages.
    node: str
    # Where a precompiled module is compiled: a rebuild of the release whose
    # public repositories carry the devel package of each of its kernels.
    build: str


@dataclass(frozen=True)
class Family:
    """A distribution family: how its packages are built and where files go."""

    name: ClassVar[str]
    # /etc/os-release ID (or ID_LIKE) values that belong to this family.
    os_ids: ClassVar[tuple[str, ...]]
    package_type: ClassVar[str]  # "deb" or "rpm"
    # Packages a build host of this family needs (its own package names).
    build_deps: ClassVar[tuple[str, ...]]
    # Package that holds the headers of kernel `{kver}`.
    kernel_headers_package: ClassVar[str]
    libdir: ClassVar[str]
    bindir: ClassVar[str] = "/usr/bin"
    includedir: ClassVar[str] = "/usr/include"
    docdir: ClassVar[str] = "/usr/share/doc"
    mandir: ClassVar[str] = "/usr/share/man"
    licensedir: ClassVar[str] = "/usr/share/licenses"
    # Where gdrcopy_doctor's modules go (a private directory); the Python
    # that runs it and the gdrcopy module is the `python` property's.
    doctordir: ClassVar[str] = "/usr/share/gdrcopy"
    modprobe: ClassVar[str]
    # Unloads gdrdrv alone.  Not `modprobe -r`: that also removes the modules
    # gdrdrv needed (nvidia, by symbols and by softdep) once nothing holds
    # them, and kmod has no option to keep them.
    rmmod: ClassVar[str]
    # Where DKMS installs modules under <modulesdir>/<kver> on this family.
    dkms_module_location: ClassVar[str]
    # Where a prebuilt module package puts gdrdrv.ko under <modulesdir>/<kver>.
    kmod_module_location: ClassVar[str]
    # Packages of the NVIDIA driver built by DKMS: a change of them must
    # rebuild gdrdrv against the new nvidia_p2p_* symbols (rpm triggers).
    nvidia_dkms_packages: ClassVar[tuple[str, ...]] = ()
    # Rendered build files: template name -> path inside the build tree.
    templates: ClassVar[Mapping[str, str]]
    # The package manager, as argv prefixes: refresh the package lists (none
    # where installing refreshes them itself), install packages by name, and
    # install package files (local paths).
    refresh_command: ClassVar[tuple[str, ...]] = ()
    install_command: ClassVar[tuple[str, ...]]
    install_files_command: ClassVar[tuple[str, ...]]
    # Drops downloaded package files (a smaller image); none where nothing is kept.
    clean_command: ClassVar[tuple[str, ...]] = ()
    # What a person types to install a package (install hints).
    hint_install: ClassVar[str]
    # What a matrix image of this family installs to build and install our
    # packages besides build_deps (registry images start from the bare distribution).
    image_packages: ClassVar[tuple[str, ...]] = ()
    # Packages that enable the repositories some of the others come from:
    # installed (and the install retried) only when the first attempt fails.
    repository_packages: ClassVar[tuple[str, ...]] = ()
    # The compile sweep: the command that lists every kernel-headers package
    # of the image's repositories, a regex whose group 1 picks a version (or
    # a whole package name) out of each listed line, the package that version
    # names, install flags that allow an older version, and the glob where
    # installed headers trees appear (the directory `make M=` builds against).
    headers_query: ClassVar[tuple[str, ...]]
    headers_line: ClassVar[str]
    headers_spec: ClassVar[str] = "{match}"
    headers_install_flags: ClassVar[tuple[str, ...]] = ()
    headers_trees: ClassVar[str]
    # The toolkit task that builds this family's packages.
    build_task: ClassVar[str]
    # What the Kubernetes images of this family install besides our packages
    # (gdrkit.kube): the loader (kmod's insmod, rmmod, modinfo, depmod) and,
    # in the image that builds gdrdrv on the node, the compiler and make.
    kube_loader_packages: ClassVar[tuple[str, ...]] = ("kmod",)
    kube_build_packages: ClassVar[tuple[str, ...]]
    # How an image installs our package files.  The Debian images resolve
    # their dependencies; see the RPM families for why theirs do not.
    kube_install_files_command: ClassVar[tuple[str, ...]]
    # Node OSes of RPM families (Debian's come from gdrkit.distro.debian's
    # releases): the os-release IDs, as node feature discovery labels nodes
    # and the GPU Operator tags images (`<ID><VERSION_ID>`); the tags made
    # when none is named; the bases by major release.
    kube_os_ids: ClassVar[tuple[str, ...]] = ()
    kube_default_nodes: ClassVar[tuple[str, ...]] = ()
    kube_bases: ClassVar[Mapping[str, KubeBases]] = {}

    registry: ClassVar[dict[str, type[Family]]] = {}

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "name" in cls.__dict__:  # not the shared bases (RpmFamily)
            Family.registry[cls.name] = cls

    @property
    def layout(self) -> Layout:
        """Where units, udev rules, modprobe.d files and modules go."""
        raise NotImplementedError(f"family {self.name} names no Layout")

    @property
    def python(self) -> PythonRuntime:
        """The Python (3.8 or later) the gdrcopy module and gdrcopy_doctor are installed for."""
        raise NotImplementedError(f"family {self.name} names no Python")

    @property
    def pythondir(self) -> str:
        return self.python.sitedir

    @property
    def python_requires(self) -> str:
        """The package relation naming that Python."""
        return self.python.requires

    @property
    def python_interpreter(self) -> str:
        return self.python.interpreter

    @property
    def release_name(self) -> str:
        """The release the packages are for (a Debian codename, el9, sle15)."""
        raise NotImplementedError(f"family {self.name} names no release")

    @property
    def glibc(self) -> str:
        """The glibc of that release: no ELF file of its packages may need a newer symbol version ("": unknown)."""
        raise NotImplementedError(f"family {self.name} names no glibc")

    def install_hint(self, *packages: str) -> str:
        """The command a person runs to install `packages` on a host of this family."""
        return format_install_hint(self.hint_install, packages)

    def headers_hint(self, kver: str) -> str:
        """How to install the headers of kernel `kver` on a host of this family."""
        return self.install_hint(self.kernel_headers_package.format(kver=kver))

    def all_image_packages(self) -> tuple[str, ...]:
        """Everything a matrix image of this family installs, without repeats."""
        return tuple(dict.fromkeys((*self.image_packages, *self.build_deps)))

    def headers_packages(self, listing: str) -> list[str]:
        """The kernel-headers packages named in `headers_query`'s output, in its order, once each (pure)."""
        line = re.compile(self.headers_line)
        found = (line.search(text) for text in listing.splitlines())
        return list(dict.fromkeys(self.headers_spec.format(match=m.group(1)) for m in found if m))

    def kernel_package_version(self, kver: str) -> str:
        """The version its kernel packages carry, from a kernel release (`uname -r`) of this family."""
        return kver

    def headers_package_for(self, kver: str, listing: str) -> str:
        """The package of `headers_query`'s output that holds kernel `kver`'s build tree ("" when none does).

        A package version may add a rebuild count to the kernel's
        (SUSE: release 6.4.0-150600.23.25-default is package 6.4.0-150600.23.25.1).
        """
        wanted = self.kernel_package_version(kver)
        prefix = self.headers_spec.format(match="")
        for spec in self.headers_packages(listing):
            found = spec.removeprefix(prefix)
            if found == wanted or found.startswith(wanted + "."):
                return spec
        return ""

    def kube_major(self, os_id: str, version_id: str) -> str:
        """The major release of this family that a node of `os_id` `version_id` runs."""
        return version_id.split(".")[0]

    def kernel_of_release(self, kver: str, major: str) -> bool:
        """Whether kernel release `kver` can be one of this family's release `major` (RPM families tell)."""
        return True

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
            "mandir": self.mandir,
            "licensedir": self.licensedir,
            "unitdir": self.unitdir,
            "udevrulesdir": self.udevrulesdir,
            "modprobedir": self.modprobedir,
            "modulesdir": self.modulesdir,
            "pythondir": self.pythondir,
            "python_requires": self.python_requires,
            "doctordir": self.doctordir,
        }


@dataclass(frozen=True)
class DebianFamily(Family):
    """Debian and Ubuntu; where files go depends on the release built for."""

    release: DebianRelease = DEFAULT_DEBIAN_RELEASE

    name = "debian"
    os_ids = ("debian", "ubuntu")
    package_type = "deb"
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
    # rpm: rpmbuild; debugedit (find-debuginfo), elfutils (its eu-strip) and cpio: the -debuginfo packages.
    kind_build_deps: ClassVar[Mapping[str, tuple[str, ...]]] = {
        "deb": (),
        "rpm": ("rpm", "debugedit", "elfutils", "cpio"),
    }
    kind_lint_deps: ClassVar[Mapping[str, tuple[str, ...]]] = {"deb": ("lintian",), "rpm": ("rpmlint",)}
    # Cross-building .deb packages for {arch} (build-deb --arch): the cross
    # toolchain, and that architecture's libc (multiarch) for dpkg-shlibdeps.
    cross_build_deps: ClassVar[tuple[str, ...]] = ("crossbuild-essential-{arch}", "libc6-dev:{arch}")
    # The package build and lint tools are the ones `build-deb` installs (build_deps
    # and kind_lint_deps["deb"]), baked into matrix images so that each build does
    # not download them again.
    image_packages = ("ca-certificates", "make", "gcc", "libc6-dev", "python3", "python3-venv", *kind_lint_deps["deb"])
    kernel_headers_package = "linux-headers-{kver}"
    refresh_command = ("apt-get", "update", "-q")
    install_command = ("apt-get", "install", "-y", "-q", "--no-install-recommends")
    install_files_command = install_command
    clean_command = ("apt-get", "clean")
    hint_install = "apt-get install"
    headers_query = ("apt-cache", "search", "--names-only", "^linux-headers-[0-9].*-(amd64|generic)$")
    headers_line = r"^(linux-headers-\S+) "
    headers_trees = "/lib/modules/*/build"
    build_task = "build-deb"
    # libelf1: the kernel headers' objtool; dkms: what gdrdrv-dkms depends on
    # (the image builds with make, not dkms).
    kube_build_packages = ("kmod", "make", "gcc", "libc6-dev", "libelf1", "dkms")
    kube_install_files_command = install_command
    # debhelper substitutes the multiarch triplet in .install files.
    libdir = "/usr/lib/${DEB_HOST_MULTIARCH}"
    modprobe = "/sbin/modprobe"
    rmmod = "/sbin/rmmod"
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
        return USR_LIB_LAYOUT if self.release.usr_merged else SPLIT_LIB_LAYOUT

    @property
    def python(self) -> PythonRuntime:
        return DEBIAN_PYTHON

    @property
    def release_name(self) -> str:
        return self.release.codename

    @property
    def glibc(self) -> str:
        return self.release.glibc


@dataclass(frozen=True)
class RpmFamily(Family):
    """What the RPM families share: the release they build for decides Python, glibc and dist tag."""

    rpm_release: RpmRelease | None = None  # None: the family's default (DEFAULT_RPM_RELEASE)

    def __post_init__(self) -> None:
        if self.rpm_release is not None and self.rpm_release.family != self.name:
            from gdrkit.system import die

            raise die(f"release {self.rpm_release.name} is of family {self.rpm_release.family}, not {self.name}")

    @property
    def target_release(self) -> RpmRelease:
        return self.rpm_release or default_rpm_release(self.name)

    @property
    def python(self) -> PythonRuntime:
        return self.target_release.python

    @property
    def release_name(self) -> str:
        return self.target_release.name

    @property
    def glibc(self) -> str:
        return self.target_release.glibc

    @property
    def layout(self) -> Layout:
        return RPM_LAYOUT


@dataclass(frozen=True)
class RhelFamily(RpmFamily):
    name = "rhel"
    os_ids = ("rhel", "centos", "rocky", "almalinux", "fedora", "amzn", "ol")
    package_type = "rpm"
    build_deps = ("gcc", "make", "rpm-build", "kernel-devel", "dkms")
    kernel_headers_package = "kernel-devel-uname-r = {kver}"
    install_command = ("dnf", "install", "-y")
    install_files_command = install_command
    hint_install = "dnf install"
    image_packages = ("git", "python3")
    repository_packages = ("epel-release",)  # dkms comes from EPEL
    headers_query = ("dnf", "-q", "--showduplicates", "list", "kernel-devel")
    headers_line = r"^kernel-devel\.\S+\s+(\S+)"
    headers_spec = "kernel-devel-{match}"
    headers_trees = "/usr/src/kernels/*"
    build_task = "build-rpm"
    clean_command = ("dnf", "clean", "all")
    kube_loader_packages = RPM_KUBE_LOADER_PACKAGES
    # elfutils-libelf: the kernel-devel tree's objtool (UBI has no -devel of it).
    kube_build_packages = (*kube_loader_packages, "make", "gcc", "elfutils-libelf")
    kube_install_files_command = RPM_KUBE_INSTALL_FILES
    # rhcos: OpenShift's CoreOS; the rebuilds name themselves.
    kube_os_ids = ("rhel", "rhcos", "rocky", "almalinux", "centos", "ol")
    kube_default_nodes = ("rhel8.10", "rhel9.4", "rhel9.6", "rhel10.0")
    kube_bases = {
        "8": KubeBases("registry.access.redhat.com/ubi8/ubi:latest", "rockylinux:8"),
        "9": KubeBases("registry.access.redhat.com/ubi9/ubi:latest", "rockylinux:9"),
        "10": KubeBases("registry.access.redhat.com/ubi10/ubi:latest", "rockylinux/rockylinux:10"),
    }
    libdir = "/usr/lib64"
    modprobe = "/usr/sbin/modprobe"
    rmmod = "/usr/sbin/rmmod"
    dkms_module_location = "/extra"
    kmod_module_location = "/extra"
    nvidia_dkms_packages = ("kmod-nvidia-latest-dkms", "kmod-nvidia-open-dkms")
    templates = {"rpm/gdrcopy.spec.j2": "gdrcopy.spec"}

    def kernel_package_version(self, kver: str) -> str:
        # 5.14.0-427.13.1.el9_4.x86_64 is kernel-devel-5.14.0-427.13.1.el9_4.
        return re.sub(r"\.(x86_64|aarch64|ppc64le|s390x)$", "", kver)

    def kernel_of_release(self, kver: str, major: str) -> bool:
        # 5.14.0-427.13.1.el9_4.x86_64, 4.18.0-553.el8_10.x86_64
        return re.search(rf"\.el{major}(_\d+)?(\.|$)", kver) is not None

    def kube_major(self, os_id: str, version_id: str) -> str:
        if os_id == "rhcos":
            # OpenShift 4.13 moved CoreOS from RHEL 8 to RHEL 9.
            minor = version_id.split(".")[1] if "." in version_id else ""
            return "9" if minor.isdigit() and int(minor) >= 13 else "8"
        return super().kube_major(os_id, version_id)


@dataclass(frozen=True)
class SuseFamily(RpmFamily):
    name = "suse"
    os_ids = ("sles", "opensuse-leap", "opensuse-tumbleweed", "suse", "opensuse")
    package_type = "rpm"
    build_deps = ("gcc", "make", "rpm-build", "kernel-default-devel", "dkms")
    kernel_headers_package = "kernel-default-devel"
    install_command = ("zypper", "--non-interactive", "install")
    # Our packages are not signed.
    install_files_command = ("zypper", "--non-interactive", "--no-gpg-checks", "install")
    hint_install = "zypper install"
    image_packages = ("git", "python3")
    headers_query = ("zypper", "-q", "se", "-s", "--match-exact", "kernel-default-devel")
    headers_line = r"\|\s*kernel-default-devel\s*\|\s*package\s*\|\s*(\S+)\s*\|"
    headers_spec = "kernel-default-devel-{match}"
    headers_install_flags = ("--oldpackage",)
    headers_trees = "/usr/src/linux-*-obj/x86_64/default"
    build_task = "build-rpm"
    clean_command = ("zypper", "--non-interactive", "clean", "--all")
    kube_loader_packages = RPM_KUBE_LOADER_PACKAGES
    # libelf1: the kernel-default-devel tree's objtool.
    kube_build_packages = (*kube_loader_packages, "make", "gcc", "libelf1")
    kube_install_files_command = RPM_KUBE_INSTALL_FILES
    kube_os_ids = ("sles", "opensuse-leap")
    kube_default_nodes = ("sles15.6", "sles15.7")
    # Leap 15.3 and later ship SLE's own kernels, so its repositories have the
    # devel package of each SLES kernel of the same service pack.
    kube_bases = {"15": KubeBases("registry.suse.com/bci/bci-base:{version}", "opensuse/leap:{version}")}
    libdir = "/usr/lib64"
    # SUSE kernels refuse unsupported (out-of-tree) modules unless told.
    modprobe = "/usr/sbin/modprobe --allow-unsupported-modules"
    rmmod = "/usr/sbin/rmmod"
    dkms_module_location = "/updates"
    kmod_module_location = "/updates"
    nvidia_dkms_packages = ("nvidia-open-driver-G06-signed-kmp-default",)
    templates = {"rpm/gdrcopy.spec.j2": "gdrcopy.spec"}

    def kernel_of_release(self, kver: str, major: str) -> bool:
        # 6.4.0-150600.23.25-default: 150600 is SLE 15 SP6.
        return re.search(rf"-{major}\d{{4}}\.", kver) is not None

    def kernel_package_version(self, kver: str) -> str:
        # 6.4.0-150600.23.25-default: the flavour is the package's name, not its version.
        return kver.rsplit("-", 1)[0] if kver.count("-") >= 2 else kver


def family(name: str) -> Family:
    """The family called `name`; dies with the known names if there is none."""
    try:
        return Family.registry[name]()
    except KeyError:
        from gdrkit.system import bad_input

        raise bad_input(
            f"unknown distribution family {name!r}",
            f"use one of: {', '.join(sorted(Family.registry))}",
        ) from None


def rpm_family(release_name: str) -> RpmFamily:
    """The RPM family that builds for release `release_name` (el8, sle15), set to that release."""
    release = rpm_release(release_name)
    cls = Family.registry[release.family]
    assert issubclass(cls, RpmFamily)
    return cls(rpm_release=release)


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


def names() -> tuple[str, ...]:
    """The names of every family, in the order they are defined."""
    return tuple(Family.registry)


def host_family(os_release_text: str) -> Family | None:
    """The family of a host whose /etc/os-release holds `os_release_text`, if known."""
    return family_for_os_release(parse_os_release(os_release_text))


def install_hint(os_release_text: str, packages: Iterable[str], fallback: str = "install") -> str:
    """The install command for `packages` on the host `os_release_text` describes."""
    fam = host_family(os_release_text)
    if fam is None:
        return f"{fallback} {' '.join(packages)}"
    return fam.install_hint(*packages)
