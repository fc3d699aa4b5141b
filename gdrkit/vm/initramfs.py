"""The small initramfs that mounts a directory of the host as the guest's root.

It holds busybox (static, from the host), the kernel modules needed to mount
a virtio-9p share (with their dependencies from that kernel's modules.dep,
decompressed), and a generated /init.  /init mounts the share, loads the
modules under test with the root's own modprobe, runs the command chrooted
into the root, checks the driver's pin refcount, unloads the modules, dumps
the kernel log and powers off.  Results go to a second serial port as
`key=value` lines, the kernel log to a third, so neither mixes with the
command's output on the console.

Everything here but `build_initramfs` is pure.
"""

from __future__ import annotations

import gzip
import lzma
import shlex
import stat
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gdrkit.system import apt_install_hint, die, ensure_debian_packages, run

ROOT_MOUNT_TAG = "gdrkit-root"
RESULTS_PORT = "/dev/ttyS1"
KERNEL_LOG_PORT = "/dev/ttyS2"
# What the initramfs needs to mount a virtio-9p root (by module name).
NINEP_MODULES = ("virtio_pci", "9pnet_virtio", "9p")
REFCOUNT_FILE = "/proc/driver/gdrdrv/nv_get_pages_refcount"
# The results key /init reports just before it loads the first module under
# test (or, with none, runs the command).  A guest that died without it died
# in the kernel's own boot or the 9p setup, before any code of ours ran.
OURS_STARTED = "ours_started"
GUEST_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
BUSYBOX = Path("/bin/busybox")
BUSYBOX_PACKAGE = "busybox-static"


@dataclass(frozen=True)
class ModuleLoad:
    """A module to `modprobe` before the command and `rmmod` after it."""

    name: str
    args: tuple[str, ...] = ()


@dataclass(frozen=True)
class GuestPlan:
    """What /init does, in order."""

    command: str
    loads: tuple[ModuleLoad, ...] = ()
    check_refcount: bool = False
    boot_modules: tuple[str, ...] = field(default_factory=tuple)


# --- cpio (newc) ------------------------------------------------------------


def _cpio_header(name: str, mode: int, size: int, ino: int, rdev: tuple[int, int] = (0, 0)) -> bytes:
    fields = (ino, mode, 0, 0, 1, 0, size, 0, 0, rdev[0], rdev[1], len(name) + 1, 0)
    return b"070701" + b"".join(f"{value:08x}".encode() for value in fields)


def _pad4(length: int) -> bytes:
    return b"\0" * (-length % 4)


def cpio_archive(entries: Iterable[tuple[str, int, bytes]], devices: Iterable[tuple[str, int, int, int]] = ()) -> bytes:
    """A newc cpio archive of (path, mode, data) entries and (path, mode, major, minor) device nodes.

    Directories have a mode with S_IFDIR and empty data; the archive is what
    the kernel unpacks as an initramfs.
    """
    out = bytearray()
    ino = 1
    for path, mode, data in entries:
        header = _cpio_header(path, mode, len(data), ino) + path.encode() + b"\0"
        out += header + _pad4(len(header)) + data + _pad4(len(data))
        ino += 1
    for path, mode, major, minor in devices:
        header = _cpio_header(path, mode, 0, ino, (major, minor)) + path.encode() + b"\0"
        out += header + _pad4(len(header))
        ino += 1
    trailer = _cpio_header("TRAILER!!!", 0, 0, 0) + b"TRAILER!!!\0"
    out += trailer + _pad4(len(trailer))
    return bytes(out)


# --- kernel modules ---------------------------------------------------------


def module_name(path: str) -> str:
    """`kernel/net/9p/9pnet-virtio.ko.xz` -> `9pnet_virtio` (modprobe's spelling)."""
    base = path.rsplit("/", 1)[-1]
    base = base.split(".ko", 1)[0]
    return base.replace("-", "_")


def parse_modules_dep(text: str) -> dict[str, tuple[str, list[str]]]:
    """modules.dep -> {name: (relative path, [dependency paths])}."""
    table: dict[str, tuple[str, list[str]]] = {}
    for line in text.splitlines():
        if ":" not in line:
            continue
        path, deps = line.split(":", 1)
        table[module_name(path)] = (path.strip(), deps.split())
    return table


def builtin_names(text: str) -> set[str]:
    """modules.builtin -> the names of modules built into the kernel."""
    return {module_name(line.strip()) for line in text.splitlines() if line.strip()}


def load_order(wanted: Sequence[str], deps: Mapping[str, tuple[str, list[str]]], builtin: set[str]) -> list[str]:
    """Relative paths of `wanted` and their dependencies, each after what it needs.

    A wanted module built into the kernel is skipped; one that is neither a
    module nor built in is an error.
    """
    order: list[str] = []

    def visit(path: str) -> None:
        name = module_name(path)
        if path in order:
            return
        for dep in deps.get(name, (path, []))[1]:
            visit(dep)
        order.append(path)

    for name in wanted:
        key = name.replace("-", "_")
        if key in deps:
            visit(deps[key][0])
        elif key not in builtin:
            raise die(
                f"kernel module {name} is neither in modules.dep nor built in",
                "the kernel needs virtio-pci and 9p (CONFIG_NET_9P_VIRTIO, CONFIG_9P_FS) to boot with gdrkit.vm",
            )
    return order


def decompress_module(path: Path) -> bytes:
    """A module file's ELF bytes, whichever compression the distribution used."""
    name = path.name
    if name.endswith(".ko"):
        return path.read_bytes()
    if name.endswith(".ko.xz"):
        return lzma.decompress(path.read_bytes())
    if name.endswith(".ko.gz"):
        return gzip.decompress(path.read_bytes())
    if name.endswith(".ko.zst"):
        with tempfile.TemporaryDirectory(prefix="gdrkit-zstd-") as scratch:
            plain = Path(scratch) / "module.ko"
            run(["zstd", "-q", "-d", "-f", str(path), "-o", str(plain)], capture=True)
            return plain.read_bytes()
    raise die(f"unknown kernel module compression: {path}")


# --- /init ------------------------------------------------------------------


def _quoted(words: Iterable[str]) -> str:
    return " ".join(shlex.quote(word) for word in words)


def init_script(plan: GuestPlan) -> str:
    """The /init shell script (busybox sh) that carries out `plan`."""
    lines = [
        "#!/bin/busybox sh",
        "# Generated by gdrkit.vm: mount the 9p root, run one command in it, report, power off.",
        "/bin/busybox mkdir -p /proc /sys /dev /newroot",
        "/bin/busybox mount -t proc proc /proc",
        "/bin/busybox --install -s /bin",
        "export PATH=/bin",
        "mount -t sysfs sysfs /sys",
        "mount -t devtmpfs devtmpfs /dev",
        f"report() {{ echo \"$1=$2\" > {RESULTS_PORT}; }}",
        "say() { echo \"gdrkit-vm: $*\"; }",
        "finish() {",
        f"  dmesg > {KERNEL_LOG_PORT}",
        "  report done 1",
        "  sync",
        "  poweroff -f",
        "}",
        "in_root() {",
        f"  chroot /newroot /usr/bin/env -i PATH={GUEST_PATH} HOME=/root TERM=dumb LANG=C.UTF-8 \"$@\"",
        "}",
        "report booted 1",
    ]
    for module in plan.boot_modules:
        lines += [
            f"insmod /modules/{shlex.quote(module)} || {{ report error {shlex.quote('insmod ' + module)}; finish; }}",
        ]
    lines += [
        f"mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,cache=loose {ROOT_MOUNT_TAG} /newroot"
        " || { report error 'mount 9p root'; finish; }",
        "mount -t proc proc /newroot/proc",
        "mount -t sysfs sysfs /newroot/sys",
        "mount -t devtmpfs devtmpfs /newroot/dev",
        "mkdir -p /newroot/dev/pts /newroot/dev/shm",
        "mount -t devpts devpts /newroot/dev/pts",
        "mount -t tmpfs tmpfs /newroot/dev/shm",
        "mount -t tmpfs tmpfs /newroot/tmp",
        "mount -t tmpfs tmpfs /newroot/run",
        "loaded_ok=1",
        # Before anything of ours runs.  Closing the port after the echo waits
        # for the UART to drain, so once this line is past, the host has it.
        f"report {OURS_STARTED} 1",
    ]
    for load in plan.loads:
        key = load.name.replace("-", "_")
        lines += [
            f"say modprobe {_quoted((load.name, *load.args))}",
            f"in_root modprobe {_quoted((load.name, *load.args))}",
            "rc=$?",
            f"report load_{key} $rc",
            '[ "$rc" = 0 ] || loaded_ok=0',
        ]
    lines += [
        'if [ "$loaded_ok" = 1 ]; then',
        f"  say running: {_quoted([plan.command])}",
        "  in_root /bin/sh -c \"$(cat /gdrkit/command.sh)\" < /dev/null",
        "  rc=$?",
        "  say command exited with status $rc",
        "  report command_status $rc",
        "else",
        "  say a module did not load: the command was not run",
        "  report command_status skipped",
        "fi",
    ]
    if plan.check_refcount:
        lines += [
            f"if [ -r {REFCOUNT_FILE} ]; then",
            f"  report refcount \"$(cat {REFCOUNT_FILE})\"",
            "else",
            "  report refcount missing",
            "fi",
        ]
    for load in reversed(plan.loads):
        key = load.name.replace("-", "_")
        lines += [
            f"if grep -q '^{key} ' /proc/modules; then",
            f"  rmmod {shlex.quote(key)}",
            f"  report unload_{key} $?",
            "fi",
        ]
    lines += ["finish", ""]
    return "\n".join(lines)


def initramfs_entries(
    plan: GuestPlan, busybox: bytes, modules: Sequence[tuple[str, bytes]]
) -> list[tuple[str, int, bytes]]:
    """The files of the initramfs: directories, busybox, modules, /init, the command."""
    directory = stat.S_IFDIR | 0o755
    regular = stat.S_IFREG
    entries: list[tuple[str, int, bytes]] = [
        (name, directory, b"") for name in ("bin", "dev", "proc", "sys", "newroot", "modules", "gdrkit")
    ]
    entries.append(("bin/busybox", regular | 0o755, busybox))
    entries += [(f"modules/{name}", regular | 0o644, data) for name, data in modules]
    entries.append(("init", regular | 0o755, init_script(plan).encode()))
    entries.append(("gdrkit/command.sh", regular | 0o644, plan.command.encode() + b"\n"))
    return entries


def ensure_busybox() -> None:
    """Install the static busybox the initramfs is made of, as the tasks install what they need."""
    ensure_debian_packages([BUSYBOX_PACKAGE])
    if not BUSYBOX.is_file():
        raise die(f"{BUSYBOX} not found although {BUSYBOX_PACKAGE} is installed", f"reinstall it: {apt_install_hint([BUSYBOX_PACKAGE])}")


def build_initramfs(destination: Path, modules_dir: Path, plan: GuestPlan) -> GuestPlan:
    """Write a gzip'd initramfs for the kernel whose modules are in `modules_dir`.

    Returns the plan with `boot_modules` (the 9p modules, in load order) filled in.
    """
    if not BUSYBOX.is_file():
        ensure_busybox()
    deps_file = modules_dir / "modules.dep"
    if not deps_file.is_file():
        raise die(f"{deps_file} not found", f"is {modules_dir} a kernel's /lib/modules/<release> directory?")
    builtin_file = modules_dir / "modules.builtin"
    builtin = builtin_names(builtin_file.read_text()) if builtin_file.is_file() else set()
    paths = load_order(NINEP_MODULES, parse_modules_dep(deps_file.read_text()), builtin)
    modules = [(module_name(path) + ".ko", decompress_module(modules_dir / path)) for path in paths]
    plan = GuestPlan(plan.command, plan.loads, plan.check_refcount, tuple(name for name, _ in modules))
    entries = initramfs_entries(plan, BUSYBOX.read_bytes(), modules)
    console = (stat.S_IFCHR | 0o600, 5, 1)
    archive = cpio_archive(entries, devices=[("dev/console", *console)])
    destination.write_bytes(gzip.compress(archive, compresslevel=1))
    return plan
