"""Debug kernels built from Debian's own kernel source, once, and cached.

The kernel's own judges (KASAN, lockdep, UBSAN, kmemleak, DEBUG_OBJECTS,
DEBUG_ATOMIC_SLEEP; KCSAN in a second kernel, since KCSAN and KASAN
exclude each other) are not in Debian's packaged kernels.  This module
builds them from `linux-source-<series>` (the source Debian ships for the
claimed release) with the smallest configuration that boots the VM tier:
x86 `defconfig` plus `kvm_guest.config`, 9p and virtio built in, the
hardware a guest never has left out, then the flavour's debug options.

A build lives under `cache_dir()/vm/debug-kernels/<flavour>-<version>-<key>`
where the key hashes the fragment, the compiler and the source tarball's
version, so a changed option builds a new kernel and an unchanged one is
reused.  `install_into_root` makes a copy of a suite's root that boots it
(the image, its modules and its build tree, hard links, for the in-root
module build); the suite's own root, which other tiers share, is left alone.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from gdrkit.system import (
    bad_input,
    cache_dir,
    die,
    ensure_debian_packages,
    log,
    missing_debian_packages,
    run,
    run_step,
)
from gdrkit.vm.rootfs import SuiteRoot, lock_file, locked, remove_tree

FLAVOURS = ("kasan", "kcsan")

# How many times a guest's time limit is stretched when it boots a debug kernel: the same
# work runs that much slower under TCG (measured on 2 shared cores: the kernel tests of
# four configurations, 45 s on Debian's kernel, ran two in 887 s under kasan).
SLOWDOWN = {"kasan": 4, "kcsan": 2}


def slowdown(kernel_image: Path) -> int:
    """SLOWDOWN's factor for `kernel_image` when it is one of our debug kernels; else 1 (pure)."""
    for flavour, factor in SLOWDOWN.items():
        if kernel_image.name.endswith(f"-gdrkit-{flavour}"):
            return factor
    return 1


# Debian bookworm's kernel source; its version is the package's (dpkg-query).
SOURCE_PACKAGE = "linux-source-6.1"
SOURCE_TARBALL = Path("/usr/src/linux-source-6.1.tar.xz")
BUILD_PACKAGES = (
    SOURCE_PACKAGE,
    "bc",
    "bison",
    "flex",
    "libelf-dev",
    "libssl-dev",
    "make",
    "gcc",
    "xz-utils",
    "kmod",
    "cpio",
)

# What the VM tier needs built in (gdrkit.vm.initramfs skips built-in modules).
VM_NEEDS = {
    "MODULES": "y",
    "MODULE_UNLOAD": "y",
    "MODVERSIONS": "y",
    "DEVTMPFS": "y",
    "PCI": "y",
    "VIRTIO_PCI": "y",
    "VIRTIO_CONSOLE": "y",
    "NET_9P": "y",
    "NET_9P_VIRTIO": "y",
    "9P_FS": "y",
    "9P_FS_POSIX_ACL": "y",
    "TMPFS": "y",
    "TMPFS_POSIX_ACL": "y",
    "UNIX98_PTYS": "y",
    "SERIAL_8250": "y",
    "SERIAL_8250_CONSOLE": "y",
    "DEBUG_FS": "y",
    # What the kernel tests use, as Debian's kernel has it: memory cgroups and user
    # namespaces (sectest), a RAM disk with ext4 on it (the fadvise test), THP.
    "MEMCG": "y",
    "USER_NS": "y",
    "BLK_DEV_RAM": "m",
    "EXT4_FS": "y",
    "TRANSPARENT_HUGEPAGE": "y",
    "LOCALVERSION_AUTO": "n",
    # No debug info: faster builds and a smaller cache; reports still name functions (kallsyms).
    "DEBUG_INFO_NONE": "y",
}

# Hardware a QEMU guest never has: left out to halve the build.
LEFT_OUT = (
    "DRM",
    "SOUND",
    "USB_SUPPORT",
    "WLAN",
    "WIRELESS",
    "CFG80211",
    "NETFILTER",
    "AGP",
    "HID",
    "INPUT_JOYSTICK",
    "INPUT_TABLET",
    "INPUT_TOUCHSCREEN",
    "INPUT_MISC",
    "ETHERNET",
    "FB",
    "MACINTOSH_DRIVERS",
    "PCCARD",
    "HAMRADIO",
    "WIRELESS_EXT",
    "RFKILL",
    "IPV6",
    "MD",
    "ATA",
    "SCSI",
    "EFI",
    "HIBERNATION",
    "SECURITY_SELINUX",
    "AUDIT",
    "NFS_FS",
    "IP_PNP",
    "NETLABEL",
    "NET_SCHED",
    "XFRM_USER",
    "IP_ADVANCED_ROUTER",
    "IP_MULTICAST",
    "I2C",
    "WATCHDOG",
    "DMADEVICES",
    "INTEL_IOMMU",
    "AMD_IOMMU",
    "KPROBES",
    "X86_MCE",
    "MICROCODE",
    "HW_RANDOM",
    "SUSPEND",
    "PROFILING",
)

# The judges, per flavour.  Each is asserted in the final .config (check_config).
FLAVOUR_OPTIONS: dict[str, dict[str, str]] = {
    "kasan": {
        "KASAN": "y",
        "KASAN_GENERIC": "y",
        "KASAN_OUTLINE": "y",
        "PROVE_LOCKING": "y",
        "DEBUG_ATOMIC_SLEEP": "y",
        "UBSAN": "y",
        "UBSAN_BOUNDS": "y",
        "UBSAN_SHIFT": "y",
        "UBSAN_BOOL": "y",
        "UBSAN_ENUM": "y",
        "DEBUG_KMEMLEAK": "y",
        "DEBUG_KMEMLEAK_MEM_POOL_SIZE": "16000",
        "DEBUG_KMEMLEAK_AUTO_SCAN": "n",
        "DEBUG_OBJECTS": "y",
        "DEBUG_OBJECTS_FREE": "y",
        "DEBUG_OBJECTS_TIMERS": "y",
        "DEBUG_OBJECTS_WORK": "y",
        "DEBUG_OBJECTS_RCU_HEAD": "y",
        "DEBUG_OBJECTS_ENABLE_DEFAULT": "1",
        "LOCALVERSION": '"-gdrkit-kasan"',
    },
    "kcsan": {
        "KCSAN": "y",
        "KCSAN_REPORT_ONCE_IN_MS": "3000",
        "KCSAN_STRICT": "n",
        "DEBUG_ATOMIC_SLEEP": "y",
        "LOCALVERSION": '"-gdrkit-kcsan"',
    },
}


def check_flavour(flavour: str) -> str:
    if flavour not in FLAVOURS:
        raise die(f"unknown debug kernel {flavour!r}", f"choose one of: {', '.join(FLAVOURS)}")
    return flavour


def fragment(flavour: str) -> dict[str, str]:
    """Every option the flavour's kernel must have, name without CONFIG_ -> value (pure)."""
    options = dict.fromkeys(LEFT_OUT, "n")
    options.update(VM_NEEDS)
    options.update(FLAVOUR_OPTIONS[check_flavour(flavour)])
    return options


def fragment_text(options: dict[str, str]) -> str:
    """A Kconfig fragment, sorted so that the same options give the same text (pure)."""
    lines = []
    for name in sorted(options):
        value = options[name]
        lines.append(f"# CONFIG_{name} is not set" if value == "n" else f"CONFIG_{name}={value}")
    return "\n".join(lines) + "\n"


def parse_config(text: str) -> dict[str, str]:
    """A .config -> {name: value}, unset options as "n" (pure)."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        unset = re.fullmatch(r"# CONFIG_(\w+) is not set", line.strip())
        if unset:
            values[unset.group(1)] = "n"
        elif line.startswith("CONFIG_") and "=" in line:
            name, value = line[len("CONFIG_") :].split("=", 1)
            values[name] = value
    return values


def config_mismatches(wanted: dict[str, str], config_text: str) -> list[str]:
    """The wanted options that the final .config does not have as asked (pure).

    Kconfig drops what an option's dependencies forbid without a word; a
    judge that silently went missing would make every run look clean."""
    have = parse_config(config_text)
    problems = []
    for name, value in sorted(wanted.items()):
        got = have.get(name, "n")
        if got != value and not (value == "n" and name not in have):
            problems.append(f"CONFIG_{name}: wanted {value}, got {got}")
    return problems


def cache_key(source_version: str, compiler: str, text: str) -> str:
    """What makes two builds the same kernel: source version, compiler, fragment (pure)."""
    digest = hashlib.sha256("\0".join((source_version, compiler, text)).encode()).hexdigest()
    return digest[:12]


@dataclass(frozen=True)
class DebugKernel:
    """A built (or to be built) debug kernel in the cache."""

    flavour: str
    source_version: str
    key: str

    @property
    def directory(self) -> Path:
        return cache_dir() / "vm" / "debug-kernels" / f"{self.flavour}-{self.source_version}-{self.key}"

    @property
    def tree(self) -> Path:
        return self.directory / "linux"

    @property
    def image(self) -> Path:
        return self.tree / "arch" / "x86" / "boot" / "bzImage"

    @property
    def marker(self) -> Path:
        """Written last: its presence means the build completed; it holds the release and the build time."""
        return self.directory / "built"

    def built(self) -> bool:
        return self.marker.is_file()

    @property
    def release(self) -> str:
        return self.marker.read_text().split()[0]

    @property
    def build_seconds(self) -> float:
        """The seconds of the attempt that finished the build (an interrupted build resumes)."""
        return float(self.marker.read_text().split()[1])

    @property
    def modules_staging(self) -> Path:
        return self.directory / "staging"


def source_version() -> str:
    result = run(["dpkg-query", "-W", "-f", "${Version}", SOURCE_PACKAGE], capture=True, check=False)
    if result.returncode != 0 or not result.stdout.strip():
        raise die(f"{SOURCE_PACKAGE} is not installed", f"apt-get install {SOURCE_PACKAGE}")
    return result.stdout.strip()


def compiler_version() -> str:
    return run(["gcc", "--version"], capture=True).stdout.splitlines()[0]


def debug_kernel(flavour: str) -> DebugKernel:
    """The cache entry for `flavour` with today's source and compiler (built or not)."""
    text = fragment_text(fragment(flavour))
    version = source_version()
    return DebugKernel(flavour, version, cache_key(version, compiler_version(), text))


def configure(tree: Path, flavour: str, jobs: int, logs: Path) -> None:
    """Write `tree`/.config for `flavour`: defconfig, kvm_guest.config, the fragment; dies if an option was lost."""
    wanted = fragment(flavour)
    fragment_file = tree / ".gdrkit-fragment.config"
    fragment_file.write_text(fragment_text(wanted))
    make = ["make", "-C", str(tree), f"-j{jobs}"]
    run_step("make defconfig kvm_guest.config", [*make, "defconfig", "kvm_guest.config"], log_dir=logs)
    merge = tree / "scripts" / "kconfig" / "merge_config.sh"
    run_step(
        "merging the debug fragment",
        [str(merge), "-m", "-O", str(tree), str(tree / ".config"), str(fragment_file)],
        cwd=tree,
        log_dir=logs,
    )
    run_step("make olddefconfig", [*make, "olddefconfig"], log_dir=logs)
    problems = config_mismatches(wanted, (tree / ".config").read_text())
    if problems:
        raise die(
            f"the {flavour} kernel's configuration lost options: {'; '.join(problems)}",
            f"fix FLAVOUR_OPTIONS/VM_NEEDS in gdrkit/vm/debugkernel.py (the .config is in {tree})",
        )


def build(flavour: str, jobs: int | None = None) -> DebugKernel:
    """Build the `flavour` debug kernel unless the cache has it; returns it."""
    check_flavour(flavour)
    ensure_debian_packages(BUILD_PACKAGES)
    kernel = debug_kernel(flavour)
    if kernel.built():
        log(f"reusing the cached {flavour} kernel {kernel.release} ({kernel.directory})")
        return kernel
    jobs = jobs or os.cpu_count() or 1
    started = time.monotonic()
    directory = kernel.directory
    logs = directory / "logs"
    unpacked = directory / "unpacked"
    if unpacked.is_file():
        # An interrupted build goes on where it stopped: kbuild rebuilds what changed.
        log(f"resuming the {flavour} kernel build in {kernel.tree}")
    else:
        shutil.rmtree(directory, ignore_errors=True)
        kernel.tree.mkdir(parents=True)
        run_step(
            f"unpacking {SOURCE_TARBALL.name}",
            ["tar", "-xf", SOURCE_TARBALL, "-C", kernel.tree, "--strip-components=1"],
            log_dir=logs,
        )
        unpacked.touch()
    with (directory / "attempts").open("a") as attempts:
        attempts.write(f"{time.time():.0f}\n")
    configure(kernel.tree, flavour, jobs, logs)
    make = ["make", "-C", str(kernel.tree), f"-j{jobs}"]
    run_step(
        f"building the {flavour} kernel (bzImage, modules; about an hour on 2 cores)",
        [*make, "bzImage", "modules"],
        log_dir=logs,
    )
    shutil.rmtree(kernel.modules_staging, ignore_errors=True)
    run_step(
        "make modules_install (staging)",
        [*make, "modules_install", f"INSTALL_MOD_PATH={kernel.modules_staging}"],
        log_dir=logs,
    )
    release = run([*make, "-s", "kernelrelease"], capture=True).stdout.strip()
    seconds = time.monotonic() - started
    starts = (directory / "attempts").read_text().split()
    since_first = time.time() - float(starts[0])
    # This attempt's seconds, the attempts, the wall time since the first began (gaps included).
    kernel.marker.write_text(f"{release} {seconds:.0f} {len(starts)} {since_first:.0f}\n")
    log(
        f"built the {flavour} kernel {release}: {seconds:.0f} s in this attempt, {len(starts)} attempt(s) ({directory})"
    )
    return kernel


def debug_root_dir(kernel: DebugKernel, root: SuiteRoot) -> Path:
    """Where the copy of `root` that boots `kernel` lives."""
    return cache_dir() / "vm" / "debug-kernels" / "roots" / f"{root.root_dir.name}-{kernel.flavour}"


def source_root_state(root: SuiteRoot) -> str:
    """What the copy must be redone for: the root, its package list (its stamp), the kernel's key."""
    stamp = root.root_dir.with_name(f"{root.root_dir.name}.json")
    facts = stamp.read_text() if stamp.is_file() else ""
    return hashlib.sha256(f"{root.root_dir}\0{facts}".encode()).hexdigest()[:12]


def install_into_root(kernel: DebugKernel, root: SuiteRoot) -> SuiteRoot:
    """A copy of `root` that boots `kernel`: its image, modules and build tree beside the root's own kernel.

    A copy, not the suite's root: other tiers share that one, and DKMS in a
    root builds for every kernel with a build tree.  The copy is made once
    per source root state and kernel key (`cp -a`, about 1 GB for bookworm);
    the build tree goes in as hard links into the cache (nothing writes to
    it), at /usr/src/linux-<release>, which /lib/modules/<release>/build names
    for the in-root module build.
    """
    if not kernel.built():
        raise die(
            f"the {kernel.flavour} debug kernel is not built",
            f"build it first: ./toolkit vm-test --debug-kernel {kernel.flavour} (builds it once)",
        )
    release = kernel.release
    target = debug_root_dir(kernel, root)
    debug_root = SuiteRoot(root.suite, release, target, root.arch)
    wanted = f"{source_root_state(root)} {kernel.key}\n"
    stamp = target.with_name(f"{target.name}.stamp")
    tree = target / "usr" / "src" / f"linux-{release}"
    target.parent.mkdir(parents=True, exist_ok=True)
    with locked(lock_file(target)):
        if stamp.is_file() and stamp.read_text() == wanted and debug_root.kernel_image.is_file():
            return debug_root
        log(f"copying {root.root_dir} to {target} for the {kernel.flavour} kernel {release}")
        stamp.unlink(missing_ok=True)
        remove_tree(target)
        with locked(lock_file(root.root_dir)):  # not while something builds in it
            run(["cp", "-a", "--reflink=auto", str(root.root_dir), str(target)])
        shutil.copy2(kernel.image, debug_root.kernel_image)
        shutil.copytree(kernel.modules_staging / "lib" / "modules" / release, debug_root.modules_dir, symlinks=True)
        run(["cp", "-al", str(kernel.tree), str(tree)])
        for link in ("build", "source"):
            (debug_root.modules_dir / link).unlink(missing_ok=True)
        (debug_root.modules_dir / "build").symlink_to(f"/usr/src/linux-{release}")
        stamp.write_text(wanted)
    return debug_root


# The suite whose kernel source the debug kernels are built from, and the architecture of their config.
SOURCE_SUITE = "bookworm"
SOURCE_ARCH = "amd64"

# The klog rules (gdrkit.vm.klog) of each flavour's judges, as a run's summary counts them.
JUDGES: dict[str, tuple[str, ...]] = {
    "kasan": ("kasan", "lockdep", "atomic-sleep", "ubsan", "kmemleak", "debugobjects"),
    "kcsan": ("kcsan", "atomic-sleep"),
}


def check_debug_target(flavour: str, suite: str, arch_name: str) -> None:
    """Refuse a debug kernel for a root it was not made for (pure)."""
    check_flavour(flavour)
    if suite.strip().lower() != SOURCE_SUITE or arch_name != SOURCE_ARCH:
        raise bad_input(
            f"the {flavour} debug kernel is built from {SOURCE_SUITE}'s {SOURCE_PACKAGE} for {SOURCE_ARCH};"
            f" asked for {suite} on {arch_name}",
            f"use --kernel {SOURCE_SUITE} --arch {SOURCE_ARCH} with --debug-kernel",
        )


def judge_counts(flavour: str, rules: list[str]) -> dict[str, int]:
    """How many findings of each of `flavour`'s judges `rules` (one per finding) holds (pure)."""
    return {judge: rules.count(judge) for judge in JUDGES[check_flavour(flavour)]}


def describe(flavour: str) -> str:
    """One line for a dry run: what the kernel is and whether the cache has it (installs nothing)."""
    missing = missing_debian_packages(BUILD_PACKAGES)
    if missing:
        return (
            f"install {' '.join(missing)}; build the {flavour} kernel from {SOURCE_TARBALL}"
            f" into {cache_dir() / 'vm' / 'debug-kernels'}: once, about an hour on 2 cores"
        )
    kernel = debug_kernel(flavour)
    if kernel.built():
        return f"reuse the cached {flavour} kernel {kernel.release} ({kernel.directory})"
    if (kernel.directory / "unpacked").is_file():
        return f"resume the interrupted build of the {flavour} kernel in {kernel.directory}"
    return (
        f"build the {flavour} kernel from {SOURCE_TARBALL} ({SOURCE_PACKAGE} {kernel.source_version}) into"
        f" {kernel.directory}: once, about an hour on 2 cores"
    )
