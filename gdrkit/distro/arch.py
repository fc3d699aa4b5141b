"""CPU architectures: the one table of their names in every tool, and how a VM boots them.

Debian says `arm64` where uname and RPM say `aarch64`, the kernel's build
says `arm64` and the cross compiler `aarch64-linux-gnu-`; each of those
spellings lives here and nowhere else.  `ARCHES` is keyed by Debian's name;
`arch()` also takes the uname/RPM spelling.
"""

from __future__ import annotations

from dataclasses import dataclass

from gdrkit.system import bad_input


@dataclass(frozen=True)
class Arch:
    """One CPU architecture as Debian, RPM, the kernel and qemu name it."""

    debian: str  # dpkg architecture: amd64, arm64
    uname: str  # uname -m, and RPM's %_arch: x86_64, aarch64
    kernel: str  # the kernel's ARCH=: x86, arm64
    triplet: str  # GNU triplet: the cross compiler's prefix and the multiarch directory
    qemu_system: str  # the qemu binary that boots it
    qemu_system_package: str  # the Debian package holding qemu_system
    qemu_machine: tuple[str, ...]  # -machine/-cpu arguments (TCG)
    console: str  # the guest's console device
    # The guest's extra result/log ports: the x86 machine has three UARTs,
    # arm64's virt only one, so results and the kernel log go through virtio-serial.
    results_port: str
    kernel_log_port: str
    # Debian's kernel flavours of this architecture (linux-image-<flavour>), the default first.
    kernel_flavours: tuple[str, ...]
    # Extra modules the initramfs loads before 9p (the virtio-serial ports, where used).
    boot_modules: tuple[str, ...] = ()

    @property
    def cross_prefix(self) -> str:
        """CROSS_COMPILE= for kbuild, and the cross compiler's name stem."""
        return f"{self.triplet}-"

    @property
    def qemu_user(self) -> str:
        """The qemu-user binary (qemu-user-static) that runs this architecture's programs on another."""
        return f"qemu-{self.uname}-static"


ARCHES: dict[str, Arch] = {
    arch.debian: arch
    for arch in (
        Arch(
            debian="amd64",
            uname="x86_64",
            kernel="x86",
            triplet="x86_64-linux-gnu",
            qemu_system="qemu-system-x86_64",
            qemu_system_package="qemu-system-x86",
            qemu_machine=("-machine", "q35,accel=tcg"),
            console="ttyS0",
            results_port="/dev/ttyS1",
            kernel_log_port="/dev/ttyS2",
            kernel_flavours=("amd64", "cloud-amd64", "rt-amd64"),
        ),
        Arch(
            debian="arm64",
            uname="aarch64",
            kernel="arm64",
            triplet="aarch64-linux-gnu",
            qemu_system="qemu-system-aarch64",
            qemu_system_package="qemu-system-arm",
            # `max`: every page granule (4/16/64 KiB) is implemented; the cheap
            # pointer-authentication algorithm keeps TCG from crawling.
            qemu_machine=("-machine", "virt,accel=tcg,gic-version=3", "-cpu", "max,pauth-impdef=on"),
            console="ttyAMA0",
            results_port="/dev/virtio-ports/results",
            kernel_log_port="/dev/virtio-ports/kernellog",
            kernel_flavours=("arm64", "arm64-16k", "rt-arm64"),
            boot_modules=("virtio_console",),
        ),
    )
}
HOST_ARCH = ARCHES["amd64"]  # the machine gdrkit runs on (Debian 12, x86_64)
_ALIASES = {a.uname: a.debian for a in ARCHES.values()}


def arch(name: str) -> Arch:
    """The architecture `name` (Debian's or uname's spelling); dies with the known names."""
    key = name.strip().lower()
    found = ARCHES.get(_ALIASES.get(key, key))
    if found is None:
        raise bad_input(
            f"unknown architecture {name!r}",
            f"use one of: {', '.join(ARCHES)} (or {', '.join(_ALIASES)})",
        )
    return found


def arch_of_abi(abi: str) -> Arch | None:
    """The architecture a Debian kernel ABI string is for (`6.12.57+deb13-arm64-16k` -> arm64), if any (pure)."""
    for candidate in ARCHES.values():
        if any(abi.endswith(f"-{flavour}") for flavour in candidate.kernel_flavours):
            return candidate
    return None


def flavour_of_abi(abi: str) -> str | None:
    """The kernel flavour an ABI string ends with (`...-cloud-amd64` -> `cloud-amd64`), longest match (pure)."""
    names = sorted((f for a in ARCHES.values() for f in a.kernel_flavours), key=len, reverse=True)
    return next((f for f in names if abi.endswith(f"-{f}")), None)
