"""The small initramfs that mounts a directory of the host as the guest's root.

It holds busybox (static, from the host), the kernel modules needed to mount
a virtio-9p share (with their dependencies from that kernel's modules.dep,
decompressed), and /init, rendered from templates/vm/init.sh.j2.  /init
mounts the share, loads the modules under test with the root's own
modprobe, runs the command chrooted into the root, checks the driver's pin
refcount, unloads the modules, dumps the kernel log and powers off.  Results go to a second serial port as
`key=value` lines, the kernel log to a third, so neither mixes with the
command's output on the console.

Everything here but `build_initramfs` is pure.
"""

from __future__ import annotations

import dataclasses
import gzip
import lzma
import shlex
import stat
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import jinja2

from gdrkit.distro.arch import HOST_ARCH, Arch
from gdrkit.system import apt_install_hint, die, ensure_debian_packages, run
from gdrkit.version import REPO_ROOT

ROOT_MOUNT_TAG = "gdrkit-root"
RESULTS_PORT = HOST_ARCH.results_port
KERNEL_LOG_PORT = HOST_ARCH.kernel_log_port
# Where /init links the virtio-serial ports by name (architectures without spare UARTs).
VIRTIO_PORTS_DIR = "/dev/virtio-ports/"
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
    arch: Arch = HOST_ARCH
    # The root's own init (`/lib/systemd/systemd`): /init hands it the root
    # as PID 1 instead of running `command` (then empty) and `loads` (none).
    init: str = ""

    def __post_init__(self) -> None:
        if self.init and (self.command or self.loads or self.check_refcount):
            raise die(
                "a guest that boots its own init runs no command of /init's",
                "let a unit in the root run it (and report to the results port)",
            )


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


INIT_TEMPLATE = "vm/init.sh.j2"


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(REPO_ROOT / "templates")),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["quote"] = shlex.quote
    env.filters["quote_all"] = shlex.join
    return env


def init_script(plan: GuestPlan) -> str:
    """The /init shell script (busybox sh) that carries out `plan`: templates/vm/init.sh.j2 rendered."""
    loads = [{"key": load.name.replace("-", "_"), "words": (load.name, *load.args)} for load in plan.loads]
    return (
        _environment()
        .get_template(INIT_TEMPLATE)
        .render(
            results_port=plan.arch.results_port,
            kernel_log_port=plan.arch.kernel_log_port,
            virtio_ports=plan.arch.results_port.startswith(VIRTIO_PORTS_DIR),
            guest_path=GUEST_PATH,
            root_tag=ROOT_MOUNT_TAG,
            ours_started=OURS_STARTED,
            refcount_file=REFCOUNT_FILE,
            boot_modules=plan.boot_modules,
            loads=loads,
            command=plan.command,
            check_refcount=plan.check_refcount,
            init=plan.init,
        )
    )


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
        raise die(
            f"{BUSYBOX} not found although {BUSYBOX_PACKAGE} is installed",
            f"reinstall it: {apt_install_hint([BUSYBOX_PACKAGE])}",
        )


def build_initramfs(destination: Path, modules_dir: Path, plan: GuestPlan, busybox: Path = BUSYBOX) -> GuestPlan:
    """Write a gzip'd initramfs for the kernel whose modules are in `modules_dir`.

    Returns the plan with `boot_modules` (the 9p modules and the
    architecture's own, in load order) filled in.  `busybox` must be a
    static busybox of the guest's architecture (the host's by default).
    """
    if busybox == BUSYBOX and not BUSYBOX.is_file():
        ensure_busybox()
    if not busybox.is_file():
        raise die(f"{busybox} not found", "the root must hold a static busybox (busybox-static); rebuild it")
    deps_file = modules_dir / "modules.dep"
    if not deps_file.is_file():
        raise die(f"{deps_file} not found", f"is {modules_dir} a kernel's /lib/modules/<release> directory?")
    builtin_file = modules_dir / "modules.builtin"
    builtin = builtin_names(builtin_file.read_text()) if builtin_file.is_file() else set()
    paths = load_order((*NINEP_MODULES, *plan.arch.boot_modules), parse_modules_dep(deps_file.read_text()), builtin)
    modules = [(module_name(path) + ".ko", decompress_module(modules_dir / path)) for path in paths]
    plan = dataclasses.replace(plan, boot_modules=tuple(name for name, _ in modules))
    entries = initramfs_entries(plan, busybox.read_bytes(), modules)
    console = (stat.S_IFCHR | 0o600, 5, 1)
    archive = cpio_archive(entries, devices=[("dev/console", *console)])
    destination.write_bytes(gzip.compress(archive, compresslevel=1))
    return plan
