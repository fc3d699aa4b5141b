"""The package description (packages/gdrcopy.yaml) as typed objects.

`load()` reads and validates the YAML; `Plan` fills its placeholders for one
distribution family, package type and kernel, and is what the templates and
the builders consume.  Nothing here runs a command.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit


from gdrkit import version, yamlfile
from gdrkit.distro.families import Family
from gdrkit.system import bad_input, die

DESCRIPTION_FILE = version.REPO_ROOT / "packages" / "gdrcopy.yaml"
SCHEMA_FILE = version.REPO_ROOT / "packages" / "gdrcopy.schema.yaml"

# The runtime library by its soname, and the unversioned name that NCCL,
# aws-ofi-nccl, DPDK and libfabric < 2.4 dlopen(): both belong in the one
# runtime package, or those consumers run without GDRCopy on a node without
# the development files (NVIDIA's RPM gdrcopy and DEB libgdrapi carry both).
RUNTIME_LIBRARY = "{libdir}/libgdrapi.so.{lib_major}*"
UNVERSIONED_LIBRARY = "{libdir}/libgdrapi.so"


@dataclass(frozen=True)
class Package:
    """One binary package, its placeholders already filled."""

    name: str
    kind: str  # "plain", "dkms" or "kmod"
    summary: str
    description: str
    architecture: str
    section: str
    multi_arch: str
    depends: tuple[str, ...]
    recommends: tuple[str, ...]
    provides: tuple[str, ...]
    conflicts: tuple[str, ...]
    replaces: tuple[str, ...]
    requires_exclude: tuple[str, ...]
    shlibs_exclude: tuple[str, ...]
    symbols_file: str  # source path of a Debian symbols file, or ""
    contents: tuple[str, ...]
    # Directories that hold its files and that no base package owns (rpm %dir):
    # erasing the package removes them.
    dirs: tuple[str, ...] = ()
    kver: str = ""  # the kernel of a prebuilt module package
    group: str = ""  # rpm Group
    suggests: tuple[str, ...] = ()

    @property
    def is_module(self) -> bool:
        return self.kind in ("dkms", "kmod")

    @property
    def is_python(self) -> bool:
        return self.kind == "python"

    def description_lines(self) -> list[str]:
        return [line.rstrip() for line in self.description.strip().splitlines()]


@dataclass(frozen=True)
class Project:
    source: str
    summary: str
    description: str
    maintainer: str
    homepage: str
    bug_tracker: str
    license: str
    kernel_module_license: str
    release: int
    changelog: str


@dataclass(frozen=True)
class KernelModule:
    name: str
    min_kernel: str
    architectures: tuple[str, ...]
    options: Mapping[str, int]
    nvidia_dkms_modules: tuple[str, ...]
    extra_sources: Mapping[str, str]

    def build_exclusive_kernel(self) -> str:
        """A bash regex (dkms BUILD_EXCLUSIVE_KERNEL) matching releases >= min_kernel."""
        major, minor = (int(part) for part in self.min_kernel.split(".")[:2])
        if minor < 10:
            minors = f"[{minor}-9]|[1-9][0-9]"
        else:
            tens, units = divmod(minor, 10)
            minors = f"{tens}[{units}-9]"
            if tens < 9:
                minors += f"|[{tens + 1}-9][0-9]"
        higher = f"[{major + 1}-9]|" if major < 9 else ""
        return f"^({major}\\.({minors})|{higher}[1-9][0-9]+)\\."


@dataclass(frozen=True)
class DeviceNode:
    name: str
    mode: str
    group: str
    # CDI names (kind, device) of the packaged spec and of the Kubernetes images' spec.
    cdi: tuple[str, str]
    kubernetes_cdi: tuple[str, str]


@dataclass(frozen=True)
class Description:
    """The whole of packages/gdrcopy.yaml, placeholders not yet filled."""

    project: Project
    kernel_module: KernelModule
    device_node: DeviceNode
    raw_packages: Mapping[str, tuple[Mapping[str, Any], ...]]

    def install_set(self, package_type: str) -> tuple[str, ...]:
        """The packages of `package_type` a DKMS install takes: all but the prebuilt-module ones."""
        return tuple(str(e["name"]) for e in self.raw_packages[package_type] if e.get("kind", "plain") != "kmod")

    def package_names(self, package_type: str) -> tuple[str, ...]:
        """Every package of `package_type`, in the description's order, a kernel written <kver>."""
        return tuple(str(e["name"]).replace("{kver}", "<kver>") for e in self.raw_packages[package_type])

    def package_of_kind(self, package_type: str, kind: str) -> str:
        """The first package of `package_type` of `kind` (dkms, kmod, python), its placeholders unfilled."""
        try:
            return next(str(e["name"]) for e in self.raw_packages[package_type] if e.get("kind") == kind)
        except StopIteration:
            raise die(f"{DESCRIPTION_FILE}: no {package_type} package of kind {kind}") from None

    def runtime_package(self, package_type: str) -> str:
        """The package of `package_type` that carries the runtime library (libgdrapi.so.2)."""
        return _runtime_package(self.raw_packages[package_type], package_type, DESCRIPTION_FILE)


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise die(f"{DESCRIPTION_FILE}: {where} must be a list of strings")
    return tuple(value)


# Every key the description may hold, per section: a key outside these would be
# silently dropped (a misspelt `depend:` ships a package without its dependencies).
def _cdi_name(value: Any) -> tuple[str, str]:
    """`vendor/class=device` -> (kind, device); dies on anything else."""
    kind, sep, device = str(value).partition("=")
    if not sep or kind.count("/") != 1 or not device:
        raise die(f"{DESCRIPTION_FILE}: CDI name {value!r} is not vendor/class=device")
    return kind, device


def _runtime_package(entries: Iterable[Mapping[str, Any]], kind: str, path: Path) -> str:
    """The one `kind` package whose contents hold the runtime library; it must hold the unversioned link too."""
    holders = [str(e["name"]) for e in entries if RUNTIME_LIBRARY in (e.get("contents") or ())]
    if len(holders) != 1:
        raise die(
            f"{path}: {len(holders)} {kind} packages list {RUNTIME_LIBRARY!r} ({', '.join(holders) or 'none'})",
            "exactly one runtime package carries the library",
        )
    runtime = holders[0]
    entry = next(e for e in entries if e["name"] == runtime)
    if UNVERSIONED_LIBRARY not in entry["contents"]:
        owner = [str(e["name"]) for e in entries if UNVERSIONED_LIBRARY in (e.get("contents") or ())]
        raise die(
            f"{path}: the {kind} runtime package {runtime} lacks {UNVERSIONED_LIBRARY!r}"
            + (f" ({', '.join(owner)} has it)" if owner else ""),
            f'move it to {runtime}\'s contents: NCCL, aws-ofi-nccl, DPDK and libfabric < 2.4 dlopen("libgdrapi.so")'
            " and run without GDRCopy where only a development package has it",
        )
    return runtime


def load(path: Path = DESCRIPTION_FILE) -> Description:
    """Read and check the package description."""
    document = yamlfile.read(path)
    yamlfile.check(document, yamlfile.load_schema(SCHEMA_FILE))
    data = document.data
    try:
        proj = data["project"]
        home = str(proj["home"]).rstrip("/")
        project = Project(
            source=proj["source"],
            summary=proj["summary"],
            description=proj["description"],
            maintainer=proj["maintainer"].replace("{home_host}", urlsplit(home).hostname or ""),
            homepage=home + "/",
            bug_tracker=home + "/issues",
            license=proj["license"],
            kernel_module_license=proj["kernel_module_license"],
            release=int(proj["release"]),
            changelog=proj["changelog"],
        )
        km = data["kernel_module"]
        kernel_module = KernelModule(
            name=km["name"],
            min_kernel=str(km["min_kernel"]),
            architectures=_strings(km["architectures"], "kernel_module.architectures"),
            options={str(k): int(v) for k, v in km["options"].items()},
            nvidia_dkms_modules=_strings(km["nvidia_dkms_modules"], "nvidia_dkms_modules"),
            extra_sources={str(k): str(v) for k, v in km["extra_sources"].items()},
        )
        node = data["device_node"]
        device_node = DeviceNode(
            name=node["name"],
            mode=str(node["mode"]),
            group=node["group"],
            cdi=_cdi_name(node["cdi"]),
            kubernetes_cdi=_cdi_name(node["kubernetes_cdi"]),
        )
        raw = {kind: tuple(data[kind]) for kind in ("deb", "rpm")}
    except (KeyError, TypeError, AttributeError, ValueError) as error:
        raise die(
            f"{path}: malformed package description ({type(error).__name__}: {error})",
            "compare it with the field list at the top of the file",
        )
    for kind, entries in raw.items():
        names = [entry.get("name") for entry in entries]
        if len(set(names)) != len(names):
            raise die(f"{path}: duplicate {kind} package names in {names}")
        _runtime_package(entries, kind, path)
    return Description(project, kernel_module, device_node, raw)


@dataclass(frozen=True)
class Plan:
    """Everything one package build needs: which packages, with what values."""

    description: Description
    family: Family
    package_type: str
    version: str
    api_version: str
    lib_major: int
    kernels: tuple[str, ...] = ()  # prebuilt module packages for these kernels
    with_dkms: bool = True
    source_date_epoch: int = 0
    device_mode: str = ""
    device_group: str = ""
    packages: tuple[Package, ...] = field(default=())

    @property
    def project(self) -> Project:
        return self.description.project

    @property
    def kernel_module(self) -> KernelModule:
        return self.description.kernel_module

    @property
    def release(self) -> int:
        return self.description.project.release

    @property
    def package_version(self) -> str:
        """The packages' version before the release (gdrkit.version.package_version: 2.6+dropin1)."""
        return version.package_version(self.version)

    @property
    def full_version(self) -> str:
        return f"{self.package_version}-{self.release}"

    @property
    def dkms_src(self) -> str:
        return f"/usr/src/{self.kernel_module.name}-{self.version}"

    def variables(self, kver: str = "") -> dict[str, str]:
        values = dict(self.family.paths())
        values.update(
            version=self.version,
            api_version=self.api_version,
            lib_major=str(self.lib_major),
            dkms_src=self.dkms_src,
            kver=kver,
        )
        return values

    def package(self, name: str) -> Package:
        for package in self.packages:
            if package.name == name:
                return package
        raise KeyError(name)


_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")


def fill(text: str, values: Mapping[str, str]) -> str:
    """Replace {name} placeholders; unknown names are an error.

    `${...}` (debhelper, shell) and `%{...}` (rpm macros) are left alone.
    """

    def replace(match: re.Match[str]) -> str:
        start = match.start()
        if start > 0 and match.string[start - 1] in "$%":
            return match.group(0)
        key = match.group(1)
        if key not in values:
            raise die(f"{DESCRIPTION_FILE}: unknown placeholder {{{key}}} in {text!r}")
        return values[key]

    return _PLACEHOLDER.sub(replace, text)


def _package(entry: Mapping[str, Any], values: Mapping[str, str]) -> Package:
    def text(key: str, default: str = "") -> str:
        return fill(str(entry.get(key, default)), values)

    def strings(key: str) -> tuple[str, ...]:
        return tuple(fill(s, values) for s in _strings(entry.get(key), key))

    return Package(
        name=text("name"),
        kind=text("kind", "plain"),
        summary=text("summary"),
        description=text("description"),
        architecture=text("architecture", "any"),
        section=text("section", "misc"),
        multi_arch=text("multi_arch"),
        depends=strings("depends") + strings("requires"),
        recommends=strings("recommends"),
        provides=strings("provides"),
        conflicts=strings("conflicts"),
        replaces=strings("replaces"),
        requires_exclude=tuple(_strings(entry.get("requires_exclude"), "requires_exclude")),
        shlibs_exclude=strings("shlibs_exclude"),
        symbols_file=text("symbols_file"),
        contents=strings("contents"),
        dirs=strings("dirs"),
        kver=values.get("kver", ""),
        group=text("group"),
        suggests=strings("suggests"),
    )


def plan(
    family: Family,
    *,
    kernels: Iterable[str] = (),
    with_dkms: bool = True,
    source_date_epoch: int = 0,
    device_mode: str = "",
    device_group: str = "",
    package_version: str = "",
    description: Description | None = None,
) -> Plan:
    """Fill the description for one family: the packages of its type to build."""
    desc = description or load()
    pkg_version = package_version or version.VERSION
    base = Plan(
        description=desc,
        family=family,
        package_type=family.package_type,
        version=pkg_version,
        api_version=version.api_version(),
        lib_major=version.MAJOR,
        kernels=tuple(kernels),
        with_dkms=with_dkms,
        source_date_epoch=source_date_epoch,
        device_mode=device_mode or desc.device_node.mode,
        device_group=device_group or desc.device_node.group,
    )
    if not re.fullmatch(r"0?[0-7]{3}", base.device_mode):
        raise bad_input(f"device mode {base.device_mode!r} is not an octal mode", "use e.g. 0660 or 0666")
    # Always with the leading 0: the module parameter node_mode reads "660" as decimal.
    base = dataclasses.replace(base, device_mode=base.device_mode.rjust(4, "0"))
    packages: list[Package] = []
    for entry in desc.raw_packages[family.package_type]:
        kind = str(entry.get("kind", "plain"))
        if kind == "dkms" and not with_dkms:
            continue
        if kind == "kmod":
            for kver in base.kernels:
                packages.append(_package(entry, base.variables(kver)))
            continue
        packages.append(_package(entry, base.variables()))
    return dataclasses.replace(base, packages=tuple(packages))


def content_matches(pattern: str, path: str) -> bool:
    """Whether a built file `path` is covered by the contents entry `pattern`."""
    if pattern.endswith("/"):
        return path.startswith(pattern) or path == pattern.rstrip("/")
    return fnmatch.fnmatchcase(path, pattern)


def check_contents(package: Package, files: Iterable[str], values: Mapping[str, str]) -> list[str]:
    """Differences between a built package's files and its described contents.

    `values` resolves placeholders left in the patterns for this host (the
    Debian multiarch directory).  Returns one line per problem; empty if equal.
    """
    patterns = [fill(p.replace("${DEB_HOST_MULTIARCH}", "{multiarch}"), values) for p in package.contents]
    paths = [f for f in files if f and not f.endswith("/")]
    problems = []
    for path in paths:
        if not any(content_matches(p, path) for p in patterns):
            problems.append(f"{package.name}: {path} is not in its description")
    for pattern in patterns:
        if not any(content_matches(pattern, path) for path in paths):
            problems.append(f"{package.name}: nothing matches {pattern!r} of its description")
    return problems
