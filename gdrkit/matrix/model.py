"""ci/matrix.yaml: the distro matrix, loaded and checked.

The file is the one place the matrix lives: `./toolkit matrix` runs it
here, and the GitHub workflow asks `./toolkit matrix-list --json` for its
job list.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gdrkit.distro import debian, families
from gdrkit.distro.arch import HOST_ARCH, arch
from gdrkit.distro.targets import Target, target_for
from gdrkit.stage.image import StageSpec
from gdrkit import yamlfile
from gdrkit.system import bad_input, die
from gdrkit.version import REPO_ROOT

MATRIX_FILE = REPO_ROOT / "ci" / "matrix.yaml"
SCHEMA_FILE = REPO_ROOT / "ci" / "matrix.schema.yaml"
# Flavours of Debian's NVIDIA kernel driver DKMS packages (see gdrkit.nvidia).
NVIDIA_FLAVOURS = ("proprietary", "open")


@dataclass(frozen=True)
class Entry:
    """One row of the matrix."""

    name: str
    family: str
    local_suite: str | None  # image built with mmdebstrap from this Debian suite
    registry_image: str | None  # or pulled from a registry
    kernel_suite: str | None  # the module is built for this suite's kernel
    kernel_package: str | None  # or for this kernel headers package, installed in the image
    boot: bool
    ci_local: bool
    # A real-NVIDIA row: the suite's NVIDIA driver DKMS package of this flavour is
    # installed and DKMS-built first, and gdrdrv is checked against it (None: softgpu).
    nvidia: str | None = None
    # The Debian architecture of the image and kernel (gdrkit.distro.arch); not
    # the host's: packages cross-built, the image run under qemu-user, the kernel
    # booted on qemu-system-<arch>.
    arch: str = HOST_ARCH.debian

    @property
    def foreign(self) -> bool:
        return self.arch != HOST_ARCH.debian

    @property
    def image_name(self) -> str:
        """Whose prepared image the entry runs in: rows of one Debian suite (and architecture) share one."""
        if self.local_suite is None:
            return self.name
        return f"debian-{self.local_suite}" + (f"-{self.arch}" if self.foreign else "")

    @property
    def stage(self) -> StageSpec:
        """The prepared image the entry runs in (gdrkit.stage.image)."""
        return StageSpec(
            self.image_name,
            self.family,
            local_suite=self.local_suite,
            registry_image=self.registry_image,
            kernel_suite=self.kernel_suite,
            kernel_package=self.kernel_package,
            arch=self.arch,
        )

    @property
    def needs_registry(self) -> bool:
        return self.registry_image is not None

    @property
    def image_description(self) -> str:
        described = (
            f"mmdebstrap {self.local_suite}" if self.local_suite is not None else f"registry {self.registry_image}"
        )
        described += f" ({self.arch}, under qemu-user)" if self.foreign else ""
        return described + (f" + NVIDIA {self.nvidia}" if self.nvidia else "")

    @property
    def target(self) -> Target | None:
        """The build target (gdrkit.distro.targets) whose packages the row builds, installs and boots.

        A Debian suite image's: that suite on the row's architecture.  A
        registry image of Ubuntu's: the release its tag names (ubuntu:22.04 is
        jammy).  None for the RPM rows, whose release is the image's own.
        """
        release = None
        if self.local_suite is not None:
            release = debian.debian_release(self.local_suite)
        elif self.registry_image is not None and self.family == "debian":
            name, _, tag = self.registry_image.partition(":")
            release = next(
                (r for r in debian.DEBIAN_RELEASES.values() if r.os_id == name.rsplit("/", 1)[-1] and r.version == tag),
                None,
            )
        if release is None:
            return None
        return target_for(families.DebianFamily(release=release), self.arch)

    def as_job(self) -> dict[str, object]:
        """What the GitHub workflow's job matrix needs of this entry."""
        job: dict[str, object] = {"name": self.name, "family": self.family, "boot": self.boot}
        job["registry"] = self.needs_registry
        if self.foreign:
            job["arch"] = self.arch
        return job


def _entry(raw: Mapping[str, Any], index: int, document: yamlfile.Document) -> Entry:
    """One entry, its shape already checked by the schema: what a schema cannot say, with the entry's line."""
    name = str(raw["name"])
    where = f"{document.path}:{document.line(['entries', index])}: entry {name!r}"
    family = raw["family"]
    if family not in families.names():
        raise bad_input(
            f"{where}: family {family!r} is not one of {', '.join(families.names())}", "use one of those families"
        )
    ((image_kind, image),) = raw["image"].items()
    ((kernel_kind, kernel),) = raw["kernel"].items()
    for kind, value in ((image_kind, image), (kernel_kind, kernel)):
        if kind in ("mmdebstrap", "debian_suite") and value not in debian.SUITES:
            raise bad_input(
                f"{where}: {value!r} is not a Debian suite we know", f"use one of {', '.join(debian.SUITES)}"
            )
    if raw["ci_local"] and image_kind != "mmdebstrap":
        raise die(f"{where}: ci_local entries must not need a registry (none is reachable in CI here)")
    if raw["boot"] and kernel_kind != "debian_suite":
        raise die(f"{where}: only Debian suite kernels can be booted here (boot: false)")
    nvidia = raw.get("nvidia")
    if nvidia is not None:
        if nvidia not in NVIDIA_FLAVOURS:
            raise die(f"{where}: nvidia {nvidia!r} is not one of {', '.join(NVIDIA_FLAVOURS)}")
        if family != "debian" or image_kind != "mmdebstrap" or kernel_kind != "debian_suite":
            raise die(
                f"{where}: nvidia rows install Debian's driver packages: they need a Debian suite image and kernel"
            )
        if raw["boot"]:
            raise die(
                f"{where}: nvidia rows cannot boot (boot: false): the real nvidia.ko needs an NVIDIA GPU to load",
                "the row names that in its load column",
            )
    target = arch(str(raw.get("arch", HOST_ARCH.debian)))
    if target != HOST_ARCH and (family != "debian" or image_kind != "mmdebstrap" or kernel_kind != "debian_suite"):
        raise die(
            f"{where}: arch {target.debian} rows are Debian suite images and kernels",
            "other architectures' images are built with mmdebstrap here (no registry); use image: {mmdebstrap: SUITE}",
        )
    if target != HOST_ARCH and nvidia is not None:
        raise die(f"{where}: nvidia rows are {HOST_ARCH.debian} only (Debian's arm64 driver packages are not tried)")
    return Entry(
        name=name,
        family=family,
        local_suite=image if image_kind == "mmdebstrap" else None,
        registry_image=image if image_kind == "registry" else None,
        kernel_suite=kernel if kernel_kind == "debian_suite" else None,
        kernel_package=kernel if kernel_kind == "package" else None,
        boot=raw["boot"],
        ci_local=raw["ci_local"],
        nvidia=nvidia,
        arch=target.debian,
    )


def load(path: Path = MATRIX_FILE) -> list[Entry]:
    """Every entry of the matrix file, checked against ci/matrix.schema.yaml and then entry by entry; names are unique."""
    document = yamlfile.read(path)
    yamlfile.check(document, yamlfile.load_schema(SCHEMA_FILE))
    entries = [_entry(raw, i, document) for i, raw in enumerate(document.data["entries"])]
    names = [e.name for e in entries]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise bad_input(f"{path}: duplicate entry names {duplicates}", "give every entry its own name")
    return entries


def select(entries: Sequence[Entry], only: Sequence[str] = (), ci_local: bool = False) -> list[Entry]:
    """The entries named in `only` (all when empty), or those marked ci_local."""
    chosen = [e for e in entries if not ci_local or e.ci_local]
    if only:
        known = {e.name for e in entries}
        unknown = [n for n in only if n not in known]
        if unknown:
            raise bad_input(f"no matrix entry named {', '.join(unknown)}", f"known: {', '.join(sorted(known))}")
        chosen = [e for e in chosen if e.name in only]
    return chosen
