"""The generated initramfs: cpio format, module order, /init script.

/init is templates/vm/init.sh.j2 rendered; after an intended change update
its golden copies with
    GDRKIT_UPDATE_GOLDEN=1 ./toolkit test -k test_vm_initramfs
"""

from __future__ import annotations

import gzip
import lzma
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from gdrkit.system import UserError, ensure_debian_packages
from gdrkit.vm import initramfs
from gdrkit.vm.initramfs import GuestPlan, ModuleLoad

MODULES_DEP_6_1 = """\
kernel/fs/netfs/netfs.ko:
kernel/fs/fscache/fscache.ko: kernel/fs/netfs/netfs.ko
kernel/fs/9p/9p.ko: kernel/net/9p/9pnet.ko kernel/fs/fscache/fscache.ko kernel/fs/netfs/netfs.ko
kernel/net/9p/9pnet.ko:
kernel/net/9p/9pnet_virtio.ko: kernel/net/9p/9pnet.ko kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko
kernel/drivers/virtio/virtio.ko:
kernel/drivers/virtio/virtio_ring.ko:
kernel/drivers/virtio/virtio_pci.ko: kernel/drivers/virtio/virtio_pci_legacy_dev.ko \
kernel/drivers/virtio/virtio_pci_modern_dev.ko kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko
kernel/drivers/virtio/virtio_pci_legacy_dev.ko:
kernel/drivers/virtio/virtio_pci_modern_dev.ko:
""".replace("\\\n", "")
GOLDEN = Path(__file__).resolve().parent / "golden" / "vm"
UPDATE = os.environ.get("GDRKIT_UPDATE_GOLDEN") == "1"


def parse_newc(data: bytes) -> dict[str, tuple[int, bytes, tuple[int, int]]]:
    """A minimal newc reader: {name: (mode, data, (rdevmajor, rdevminor))}."""
    entries: dict[str, tuple[int, bytes, tuple[int, int]]] = {}
    offset = 0
    while True:
        header = data[offset : offset + 110]
        assert header[:6] == b"070701"
        fields = [int(header[6 + 8 * i : 14 + 8 * i], 16) for i in range(13)]
        mode, size, rmajor, rminor, namesize = fields[1], fields[6], fields[9], fields[10], fields[11]
        name_start = offset + 110
        name = data[name_start : name_start + namesize - 1].decode()
        data_start = name_start + namesize
        data_start += -data_start % 4
        if name == "TRAILER!!!":
            return entries
        entries[name] = (mode, data[data_start : data_start + size], (rmajor, rminor))
        offset = data_start + size
        offset += -offset % 4


def test_cpio_round_trip() -> None:
    archive = initramfs.cpio_archive(
        [
            ("bin", stat.S_IFDIR | 0o755, b""),
            ("bin/x", stat.S_IFREG | 0o755, b"abc"),
            ("init", stat.S_IFREG | 0o755, b"12345"),
        ],
        devices=[("dev/console", stat.S_IFCHR | 0o600, 5, 1)],
    )
    assert len(archive) % 4 == 0
    entries = parse_newc(archive)
    assert entries["bin/x"][1] == b"abc"
    assert entries["init"][1] == b"12345"
    assert stat.S_ISDIR(entries["bin"][0])
    assert stat.S_ISCHR(entries["dev/console"][0]) and entries["dev/console"][2] == (5, 1)


def test_gnu_cpio_reads_our_archive(tmp_path: Path) -> None:
    ensure_debian_packages(["cpio"])  # as the tasks install what they need
    archive = initramfs.cpio_archive([("a", stat.S_IFDIR | 0o755, b""), ("a/b.txt", stat.S_IFREG | 0o644, b"hello\n")])
    listing = subprocess.run(["cpio", "-t", "--quiet"], input=archive, capture_output=True, check=True)
    assert listing.stdout.decode().split() == ["a", "a/b.txt"]


def test_module_name() -> None:
    assert initramfs.module_name("kernel/net/9p/9pnet_virtio.ko.xz") == "9pnet_virtio"
    assert initramfs.module_name("updates/dkms/gdr-drv.ko") == "gdr_drv"


def test_load_order_puts_dependencies_first() -> None:
    order = initramfs.load_order(initramfs.NINEP_MODULES, initramfs.parse_modules_dep(MODULES_DEP_6_1), set())
    names = [initramfs.module_name(p) for p in order]
    assert sorted(names) == sorted(
        ["virtio", "virtio_ring", "virtio_pci_legacy_dev", "virtio_pci_modern_dev", "virtio_pci",
         "9pnet", "9pnet_virtio", "netfs", "fscache", "9p"]
    )  # fmt: skip
    assert len(names) == len(set(names))
    for module, needs in (("virtio_pci", "virtio"), ("9pnet_virtio", "9pnet"), ("9p", "netfs"), ("fscache", "netfs")):
        assert names.index(needs) < names.index(module)


def test_builtin_modules_are_skipped() -> None:
    deps = initramfs.parse_modules_dep(MODULES_DEP_6_1)
    del deps["virtio_pci"]
    order = initramfs.load_order(["virtio_pci", "9p"], deps, {"virtio_pci"})
    assert "virtio_pci" not in [initramfs.module_name(p) for p in order]


def test_missing_module_is_an_error_with_a_hint() -> None:
    with pytest.raises(UserError, match="9p"):
        initramfs.load_order(["9p"], {}, set())


def test_decompress_module(tmp_path: Path) -> None:
    elf = b"\x7fELF module bytes"
    (tmp_path / "a.ko").write_bytes(elf)
    (tmp_path / "b.ko.xz").write_bytes(lzma.compress(elf))
    (tmp_path / "c.ko.gz").write_bytes(gzip.compress(elf))
    for name in ("a.ko", "b.ko.xz", "c.ko.gz"):
        assert initramfs.decompress_module(tmp_path / name) == elf
    if shutil.which("zstd"):
        subprocess.run(["zstd", "-q", str(tmp_path / "a.ko"), "-o", str(tmp_path / "d.ko.zst")], check=True)
        assert initramfs.decompress_module(tmp_path / "d.ko.zst") == elf


PLAN = GuestPlan(
    command="gdrdrv_ktest --verbose 'a b'",
    loads=(ModuleLoad("softgpu", ("force_ram=1",)), ModuleLoad("gdrdrv", ("dbg_enabled=1",))),
    check_refcount=True,
    boot_modules=("9pnet.ko", "9p.ko"),
)


def test_init_script_order_of_work() -> None:
    script = initramfs.init_script(PLAN)
    positions = [
        script.index("insmod /modules/9pnet.ko"),
        script.index("insmod /modules/9p.ko"),
        script.index("mount -t 9p"),
        script.index("report ours_started 1"),
        script.index("in_root modprobe softgpu force_ram=1"),
        script.index("in_root modprobe gdrdrv dbg_enabled=1"),
        script.index("/gdrkit/command.sh"),
        script.index("report refcount"),
        script.index("rmmod gdrdrv"),
        script.index("rmmod softgpu"),
        script.rindex("finish"),
    ]
    assert positions == sorted(positions)
    assert script.startswith("#!/bin/busybox sh\n")
    assert "report load_softgpu $rc" in script and "report unload_gdrdrv $?" in script


def test_init_script_runs_the_command_clean_and_as_root() -> None:
    script = initramfs.init_script(PLAN)
    assert "chroot /newroot /usr/bin/env -i PATH=" in script
    assert "LD_LIBRARY_PATH" not in script
    assert "< /dev/null" in script


def test_init_script_without_modules_or_refcount() -> None:
    script = initramfs.init_script(GuestPlan(command="true"))
    assert "modprobe" not in script and "rmmod" not in script and "refcount" not in script
    assert "report command_status $rc" in script


def test_the_ours_started_marker_comes_once_before_anything_of_ours() -> None:
    # The VM runner retries a guest that died without this marker, so it must
    # come after the kernel's boot and the 9p setup, before the first modprobe
    # (or, with no modules, before the command), and nowhere else.
    marker = f"report {initramfs.OURS_STARTED} 1"
    for plan in (PLAN, GuestPlan(command="true")):
        script = initramfs.init_script(plan)
        assert script.count(marker) == 1
        first_of_ours = script.find("in_root modprobe")
        if first_of_ours < 0:
            first_of_ours = script.index("/gdrkit/command.sh")
        assert script.index("mount -t 9p") < script.index(marker) < first_of_ours


def test_init_script_hands_the_root_to_its_own_init() -> None:
    # systemd as PID 1 (pkgkit.systemd): the marker, then switch_root; no command, no modprobe.
    script = initramfs.init_script(GuestPlan(command="", init="/lib/systemd/systemd"))
    marker = f"report {initramfs.OURS_STARTED} 1"
    assert script.count(marker) == 1
    assert (
        script.index("mount -t 9p")
        < script.index(marker)
        < script.index("exec switch_root /newroot /lib/systemd/systemd")
    )
    assert "/gdrkit/command.sh" not in script and "modprobe" not in script and "poweroff" in script


def test_a_guest_with_its_own_init_runs_no_command_of_init() -> None:
    with pytest.raises(UserError, match="runs no command"):
        GuestPlan(command="true", init="/lib/systemd/systemd")


def test_module_arguments_are_quoted() -> None:
    script = initramfs.init_script(GuestPlan("true", (ModuleLoad("softgpu", ("name=a b;reboot",)),)))
    assert "in_root modprobe softgpu 'name=a b;reboot'" in script


@pytest.mark.parametrize("name", ["init-full.sh", "init-bare.sh"])
def test_init_script_matches_its_golden_copy(name: str) -> None:
    script = initramfs.init_script(PLAN if name == "init-full.sh" else GuestPlan(command="true"))
    golden = GOLDEN / name
    if UPDATE:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(script)
    assert script == golden.read_text(), f"/init changed; if intended: GDRKIT_UPDATE_GOLDEN=1 and diff {golden}"


def test_init_script_is_valid_shell(tmp_path: Path) -> None:
    initramfs.ensure_busybox()  # installed as vm-test installs it
    path = tmp_path / "init"
    path.write_text(initramfs.init_script(PLAN))
    subprocess.run([str(initramfs.BUSYBOX), "sh", "-n", str(path)], check=True)


def test_initramfs_contents() -> None:
    entries = {
        name: (mode, data) for name, mode, data in initramfs.initramfs_entries(PLAN, b"BUSYBOX", [("9p.ko", b"ELF")])
    }
    assert entries["bin/busybox"][1] == b"BUSYBOX" and entries["bin/busybox"][0] & 0o111
    assert entries["modules/9p.ko"][1] == b"ELF"
    assert entries["gdrkit/command.sh"][1] == b"gdrdrv_ktest --verbose 'a b'\n"
    assert entries["init"][1].decode() == initramfs.init_script(PLAN)


def test_build_initramfs_from_a_modules_dir(tmp_path: Path) -> None:
    modules = tmp_path / "modules"
    for line in MODULES_DEP_6_1.splitlines():
        path = modules / line.split(":")[0]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"ELF " + path.name.encode())
    (modules / "modules.dep").write_text(MODULES_DEP_6_1)
    destination = tmp_path / "initrd.gz"
    plan = initramfs.build_initramfs(destination, modules, GuestPlan("true"))
    assert plan.boot_modules[-1] in ("9p.ko", "9pnet_virtio.ko", "virtio_pci.ko")
    entries = parse_newc(gzip.decompress(destination.read_bytes()))
    assert entries["modules/9p.ko"][1] == b"ELF 9p.ko"
    assert "dev/console" in entries
    assert f"insmod /modules/{plan.boot_modules[0]}" in entries["init"][1].decode()


def test_build_initramfs_needs_modules_dep(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="modules.dep"):
        initramfs.build_initramfs(tmp_path / "x", tmp_path, GuestPlan("true"))
