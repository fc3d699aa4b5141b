"""arm64 guests without booting one: the architecture table, kernels, qemu's command line, /init,
kernel image headers, the cross root and what is copied out of it (all pure or on tmp_path)."""

from __future__ import annotations

import gzip
import os
import struct
from collections.abc import Callable, Sequence
from pathlib import Path, PurePosixPath

import pytest

from gdrkit.distro.arch import ARCHES, HOST_ARCH, arch, arch_of_abi, flavour_of_abi
from gdrkit.system import UserError
from gdrkit.version import REPO_ROOT as REPO
from gdrkit.vm import cross, foreign, initramfs, kimage, rootfs, suites
from gdrkit.vm.initramfs import GuestPlan, ModuleLoad
from gdrkit.vm.qemu import VmPaths, VmResult, qemu_command
from gdrkit.vm.runner import VmTestOptions, page_size_problem, plan
from gdrkit.vm.suites import SUITES, AptQuery, KernelChoice, Suite

ARM64 = ARCHES["arm64"]
ABI_4K = "6.12.118+deb13-arm64"
ABI_16K = "6.12.118+deb13-arm64-16k"


# --- the architecture table ---------------------------------------------------


@pytest.mark.parametrize("name", ["arm64", "aarch64", "ARM64", " aarch64 "])
def test_arm64_has_both_spellings(name: str) -> None:
    assert arch(name) is ARM64
    assert (ARM64.debian, ARM64.uname, ARM64.kernel, ARM64.cross_prefix) == (
        "arm64",
        "aarch64",
        "arm64",
        "aarch64-linux-gnu-",
    )


def test_an_unknown_architecture_is_refused_with_the_known_names() -> None:
    with pytest.raises(UserError) as caught:
        arch("riscv64")
    assert "riscv64" in str(caught.value)
    hint = caught.value.hint or ""
    assert "amd64" in hint and "arm64" in hint and "aarch64" in hint


@pytest.mark.parametrize(
    "abi, debian, flavour",
    [
        ("6.12.118+deb13-arm64", "arm64", "arm64"),
        ("6.12.118+deb13-arm64-16k", "arm64", "arm64-16k"),
        ("6.1.0-41-cloud-amd64", "amd64", "cloud-amd64"),
        ("6.1.0-41-amd64", "amd64", "amd64"),
        ("6.1.0-41-common", None, None),
    ],
)
def test_kernel_abis_name_their_architecture_and_flavour(abi: str, debian: str | None, flavour: str | None) -> None:
    found = arch_of_abi(abi)
    assert (found.debian if found else None) == debian
    assert flavour_of_abi(abi) == flavour


def test_a_bare_kernel_version_takes_the_architecture_s_plain_flavour() -> None:
    assert suites.normalize_abi("6.12.118+deb13", ARM64) == ABI_4K
    assert suites.normalize_abi("linux-image-6.12.118+deb13-arm64-16k", ARM64) == ABI_16K
    assert suites.normalize_abi("6.1.0-41") == "6.1.0-41-amd64"


# --- resolving arm64 kernels -----------------------------------------------------


def fake_lists(current: dict[str, str], packages: set[str]) -> Callable[[Suite], AptQuery]:
    def lists_for(suite: Suite) -> AptQuery:
        def query(args: Sequence[str]) -> tuple[int, str]:
            if args[0] == "depends":
                meta = args[-1].removeprefix("linux-image-")
                target = current.get(meta)
                return (0, f"{args[-1]}\n  Depends: linux-image-{target}\n") if target else (100, "")
            if args[0] == "show" and args[-1] in packages:
                return 0, f"Package: {args[-1]}\n"
            return 100, ""

        return query

    return lists_for


def test_trixie_arm64_and_its_16k_flavour_resolve_to_their_own_kernels() -> None:
    lists = fake_lists({"arm64": ABI_4K, "arm64-16k": ABI_16K}, set())
    four = suites.resolve_kernel("trixie", lists_for=lists, arch=ARM64)
    sixteen = suites.resolve_kernel("trixie", lists_for=lists, arch=ARM64, flavour="arm64-16k")
    assert (four.abi, four.arch, four.version) == (ABI_4K, ARM64, "6.12.118+deb13")
    assert (sixteen.abi, sixteen.version, sixteen.image_package) == (
        ABI_16K,
        "6.12.118+deb13",
        f"linux-image-{ABI_16K}",
    )


def test_a_flavour_of_another_architecture_is_refused() -> None:
    with pytest.raises(UserError) as caught:
        suites.resolve_kernel("trixie", lists_for=fake_lists({}, set()), arch=ARM64, flavour="cloud-amd64")
    assert "arm64-16k" in (caught.value.hint or "")


def test_an_amd64_kernel_asked_for_as_arm64_says_which_arch_it_is() -> None:
    with pytest.raises(UserError) as caught:
        suites.resolve_kernel("6.12.118+deb13-amd64", lists_for=fake_lists({}, set()), arch=ARM64)
    assert "--arch amd64" in (caught.value.hint or "")


def test_arm64_package_lists_live_apart_from_amd64_ones(tmp_path: Path) -> None:
    trixie = SUITES["trixie"]
    host, target = suites.AptLists(trixie, tmp_path), suites.AptLists(trixie, tmp_path, ARM64)
    assert host.base == tmp_path / "trixie" and target.base == tmp_path / "trixie-arm64"
    assert "-oAPT::Architecture=arm64" in target.options()
    assert "-oAPT::Architecture=amd64" in host.options()


# --- qemu and /init ------------------------------------------------------------------


def paths(tmp_path: Path) -> VmPaths:
    return VmPaths(tmp_path, tmp_path / "i", tmp_path / "c", tmp_path / "r", tmp_path / "k", tmp_path / "v")


def test_arm64_boots_on_the_virt_machine_with_virtio_serial_result_ports(tmp_path: Path) -> None:
    argv = qemu_command(tmp_path / "Image", paths(tmp_path), tmp_path, arch=ARM64)
    line = " ".join(argv)
    assert argv[0] == "qemu-system-aarch64"
    assert "virt,accel=tcg" in line and "-cpu max" in line and "kvm" not in line
    assert "console=ttyAMA0" in line
    assert "virtserialport,chardev=results,name=results" in line
    assert "virtserialport,chardev=kernellog,name=kernellog" in line
    assert "chardev:results" not in line  # virt has one UART: the console's
    assert "ivshmem-plain,memdev=vram" in line  # the same stand-in VRAM BAR


def test_amd64_keeps_its_three_uarts(tmp_path: Path) -> None:
    line = " ".join(qemu_command(tmp_path / "bzImage", paths(tmp_path), tmp_path))
    assert line.startswith("qemu-system-x86_64 -machine q35,accel=tcg")
    assert "console=ttyS0" in line and "-serial chardev:results -serial chardev:kernellog" in line
    assert "virtio-serial" not in line


def test_arm64_init_waits_for_the_named_ports_and_reports_the_page_size() -> None:
    script = initramfs.init_script(GuestPlan("gdrcopy_sanity", (ModuleLoad("softgpu"),), arch=ARM64))
    assert "/sys/class/virtio-ports/" in script
    assert "> /dev/virtio-ports/results" in script and "dmesg > /dev/virtio-ports/kernellog" in script
    # The ports exist only once the modules are in: booted is reported after them.
    assert script.index("virtio-ports/*") < script.index("report booted 1")
    assert 'report page_size "$(in_root getconf PAGESIZE)"' in script
    assert "virtio-ports" not in initramfs.init_script(GuestPlan("true"))


def test_arm64_initramfs_loads_virtio_console_when_it_is_a_module(tmp_path: Path) -> None:
    modules = tmp_path / "modules"
    (modules / "kernel").mkdir(parents=True)
    for name in ("virtio_pci", "9pnet", "9pnet_virtio", "9p", "virtio_console"):
        (modules / "kernel" / f"{name}.ko").write_bytes(b"\x7fELF" + name.encode())
    (modules / "modules.dep").write_text(
        "kernel/virtio_pci.ko:\nkernel/9pnet.ko:\nkernel/9pnet_virtio.ko: kernel/9pnet.ko\n"
        "kernel/9p.ko: kernel/9pnet.ko\nkernel/virtio_console.ko:\n"
    )
    busybox = tmp_path / "busybox"
    busybox.write_bytes(b"arm64 busybox")
    done = initramfs.build_initramfs(tmp_path / "initrd", modules, GuestPlan("true", arch=ARM64), busybox)
    assert done.boot_modules[-1] == "virtio_console.ko"
    assert b"arm64 busybox" in gzip.decompress((tmp_path / "initrd").read_bytes())


# --- kernel images --------------------------------------------------------------------


def arm64_header(page_code: int) -> bytes:
    header = bytearray(64)
    struct.pack_into("<QQQ", header, 0x08, 0, 1 << 20, 0x8 | (page_code << 1))
    header[0x38:0x3C] = kimage.ARM64_MAGIC
    return bytes(header)


@pytest.mark.parametrize("code, size", [(1, 4096), (2, 16384), (3, 65536), (0, None)])
def test_the_image_header_declares_the_page_size(code: int, size: int | None) -> None:
    assert kimage.arm64_page_size(arm64_header(code)) == size


def test_a_zboot_kernel_is_unpacked_for_qemu(tmp_path: Path) -> None:
    plain = arm64_header(2) + b"kernel text" * 100
    payload = gzip.compress(plain)
    head = bytearray(64)
    head[0:2], head[4:8] = b"MZ", kimage.ZBOOT_MAGIC
    struct.pack_into("<II", head, 8, 64, len(payload))
    head[24:28] = b"gzip"
    image = tmp_path / "vmlinuz"
    image.write_bytes(bytes(head) + payload)
    booted = kimage.bootable_image(image, tmp_path, ARM64)
    assert booted != image and booted.read_bytes() == plain
    assert kimage.image_page_size(image, ARM64) == 16384
    assert kimage.bootable_image(image, tmp_path, HOST_ARCH) == image  # x86 images go as they are


def test_a_plain_image_goes_to_qemu_unchanged(tmp_path: Path) -> None:
    image = tmp_path / "vmlinuz"
    image.write_bytes(arm64_header(1) + b"x" * 64)
    assert kimage.bootable_image(image, tmp_path, ARM64) == image
    assert kimage.image_page_size(image, ARM64) == 4096


def test_a_guest_page_size_other_than_the_image_s_fails_the_run(tmp_path: Path) -> None:
    def result(page: str) -> VmResult:
        return VmResult(0, tmp_path / "c", [], 1.0, results={"page_size": page, "done": "1"})

    assert page_size_problem(result("16384"), 16384) is None
    assert "4096" in (page_size_problem(result("4096"), 16384) or "")
    assert page_size_problem(result("4096"), None) is None


# --- roots and the cross build -----------------------------------------------------------


def test_an_arm64_root_has_no_compiler_and_its_own_busybox(tmp_path: Path) -> None:
    argv = rootfs.mmdebstrap_command(KernelChoice(SUITES["trixie"], ABI_4K, ARM64), tmp_path)
    include = next(a for a in argv if a.startswith("--include="))
    assert "--architectures=arm64" in argv
    assert f"linux-image-{ABI_4K}" in include and "busybox-static" in include
    assert "build-essential" not in include and "linux-headers" not in include
    assert rootfs.host_packages(ARM64)[0] == "qemu-system-arm" and "qemu-user-static" in rootfs.host_packages(ARM64)
    assert "qemu-system-x86" not in rootfs.host_packages(ARM64)


def test_cross_steps_use_the_cross_compiler_and_stage_the_install() -> None:
    steps = rootfs.default_steps(ABI_16K, cross=ARM64, destdir="/stage")
    names = [step.name for step in steps]
    assert names[0] == "clean_stage" and "ldconfig" not in names and "depmod" not in names
    driver = next(step for step in steps if step.name == "driver")
    assert driver.script.startswith("ARCH=arm64 CROSS_COMPILE=aarch64-linux-gnu- CC=aarch64-linux-gnu-gcc make")
    assert f"KDIR=/usr/src/linux-headers-{ABI_16K}" in driver.script and "DESTDIR=/stage" in driver.script
    native = rootfs.default_steps(ABI_4K)
    assert all("CROSS_COMPILE" not in step.script for step in native) and native[-1].name == "depmod"


SHOW_HEADERS = f"""Package: linux-headers-{ABI_4K}
Depends: linux-base (>= 4.12~), linux-headers-6.12.118+deb13-common (= 6.12.118-1), linux-image-{ABI_4K} (= 6.12.118-1) | linux-image-{ABI_4K}-unsigned (= 6.12.118-1), linux-kbuild-6.12.118+deb13, gcc-14:arm64
"""


def test_the_cross_root_takes_the_host_parts_of_the_headers_dependencies() -> None:
    depends = cross.parse_depends(SHOW_HEADERS)
    assert depends[:2] == ["linux-base", "linux-headers-6.12.118+deb13-common"]
    assert f"linux-image-{ABI_4K}" in depends and "gcc-14" in depends
    assert cross.cross_packages(ARM64, depends) == [
        "build-essential",
        "gcc-aarch64-linux-gnu",
        "libc6-dev-arm64-cross",
        "linux-headers-6.12.118+deb13-common",
        "linux-kbuild-6.12.118+deb13",
    ]
    choice = KernelChoice(SUITES["trixie"], ABI_16K, ARM64)
    assert cross.cross_root_name(choice) == "trixie-6.12.118+deb13-cross-arm64"
    assert "libcmocka-dev:arm64" in cross.target_library_script(ARM64)


@pytest.mark.parametrize(
    "text, ready",
    [
        ("enabled\ninterpreter /usr/libexec/qemu-binfmt/aarch64-binfmt-P\nflags: PF\n", True),
        ("enabled\ninterpreter /usr/bin/qemu-aarch64\nflags: \n", False),  # not usable in a chroot
        ("disabled\nflags: PF\n", False),
        ("", False),
    ],
)
def test_binfmt_must_be_enabled_with_the_fix_binary_flag(text: str, ready: bool) -> None:
    assert foreign.binfmt_ready(text) is ready


def test_staged_files_land_where_the_root_s_links_say_never_outside_it(tmp_path: Path) -> None:
    root, stage = tmp_path / "root", tmp_path / "stage"
    (root / "usr" / "lib").mkdir(parents=True)
    (root / "lib").symlink_to("usr/lib")  # usrmerge, relative
    (root / "opt").mkdir()
    (root / "opt" / "escape").symlink_to("/usr")  # absolute: means the root's /usr
    (stage / "lib" / "modules" / ABI_4K / "extra").mkdir(parents=True)
    (stage / "lib" / "modules" / ABI_4K / "extra" / "gdrdrv.ko").write_bytes(b"ko")
    (stage / "opt" / "escape" / "x").mkdir(parents=True)
    (stage / "opt" / "escape" / "x" / "f").write_text("f")
    (stage / "usr" / "local" / "lib").mkdir(parents=True)
    (stage / "usr" / "local" / "lib" / "libgdrapi.so.2").symlink_to("libgdrapi.so.2.6.1")
    assert cross.install_stage(stage, root) == 3
    assert (root / "usr" / "lib" / "modules" / ABI_4K / "extra" / "gdrdrv.ko").read_bytes() == b"ko"
    assert (root / "lib").is_symlink()
    assert (root / "usr" / "x" / "f").read_text() == "f"
    assert os.readlink(root / "usr" / "local" / "lib" / "libgdrapi.so.2") == "libgdrapi.so.2.6.1"
    assert cross.inside(root, PurePosixPath("/opt/escape/../../etc")) == root / "etc"


def test_any_warning_in_the_cross_build_output_is_found() -> None:
    outputs = [
        "CC [M]  gdrdrv.o\n",
        "gdrdrv.c:12:3: warning: unused variable 'x' [-Wunused-variable]\n",
        "WARNING: modpost: missing MODULE_DESCRIPTION() in gdrdrv.o\n",
        "make: Nothing to be done for 'all'.\n",
    ]
    assert len(cross.compiler_warnings(outputs)) == 2
    assert cross.compiler_warnings(["ok\n"]) == []


# --- the task's plan ------------------------------------------------------------------------


def test_the_dry_run_of_an_arm64_run_names_the_cross_build_and_qemu(monkeypatch: pytest.MonkeyPatch) -> None:
    from gdrkit.vm import runner

    monkeypatch.setattr(runner, "cached_suite_root", lambda *_: None)
    monkeypatch.setattr(runner, "missing_debian_packages", lambda packages: [])
    lines = plan(VmTestOptions(kernel="trixie", arch="arm64", flavour="arm64-16k", dry_run=True))
    text = "\n".join(lines)
    assert "qemu-user" in text and "gcc-aarch64-linux-gnu" in text and "qemu-system-aarch64" in text


def test_the_dry_run_refuses_an_unknown_arch_or_flavour() -> None:
    with pytest.raises(UserError, match="unknown architecture"):
        plan(VmTestOptions(kernel="trixie", arch="sparc", dry_run=True))
    with pytest.raises(UserError, match="no kernel flavour"):
        plan(VmTestOptions(kernel="trixie", arch="arm64", flavour="arm64-64k", dry_run=True))


# --- packages and matrix rows ---------------------------------------------------------------

ARM64_ROW = """entries:
  - name: debian-trixie-arm64
    image: {mmdebstrap: trixie}
    family: debian
    kernel: {debian_suite: trixie}
    arch: arm64
    boot: true
    ci_local: false
"""


def test_the_matrix_has_arm64_rows_for_bookworm_and_trixie_outside_ci() -> None:
    from gdrkit.matrix import model

    rows = {e.kernel_suite: e for e in model.load() if e.arch == "arm64"}
    assert set(rows) == {"bookworm", "trixie"}
    assert all(row.boot and not row.ci_local for row in rows.values())
    assert rows["trixie"].as_job()["arch"] == "arm64"  # the workflow's job matrix sees it


def test_an_arm64_row_gets_its_own_image_and_cross_builds_its_packages(tmp_path: Path) -> None:
    from gdrkit.matrix import model, runner

    (entry,) = model.load(write_matrix(tmp_path, ARM64_ROW))
    assert entry.foreign and entry.image_name == "debian-trixie-arm64"
    assert "arm64, under qemu-user" in entry.image_description
    assert runner.image_packages(entry, ABI_4K) == ("make", "gcc", "libc6-dev", f"linux-headers-{ABI_4K}")
    request = runner.cross_request(entry, tmp_path / "src", tmp_path / "dist")
    assert (request.host_arch, request.kinds, request.with_kmod, request.suite) == ("arm64", ("deb",), False, "trixie")
    assert "skipped" in runner.sweep_plan(entry, offline=True)[0]
    plan_text = "\n".join(runner.entry_plan(entry, offline=True))
    assert "build-packages --targets trixie-arm64" in plan_text and "linux-headers-<kernel>" in plan_text
    assert "check them against target trixie-arm64: glibc 2.41" in plan_text


@pytest.mark.parametrize(
    "change, message",
    [
        (("arch: arm64", "arch: mips"), "unknown architecture"),
        (("image: {mmdebstrap: trixie}", "image: {registry: debian:trixie}"), "Debian suite images"),
    ],
)
def test_bad_arm64_rows_are_refused(tmp_path: Path, change: tuple[str, str], message: str) -> None:
    from gdrkit.matrix import model

    with pytest.raises(UserError, match=message):
        model.load(write_matrix(tmp_path, ARM64_ROW.replace(*change)))


def write_matrix(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "matrix.yaml"
    path.write_text(body)
    return path


def test_cross_deb_builds_name_the_host_arch_and_skip_the_build_deps_check() -> None:
    from gdrkit.packaging import build

    assert build.cross_deb_args("aarch64") == ["--host-arch=arm64", "-d"]
    assert build.cross_deb_args("") == []
    assert build._multiarch("arm64") == "aarch64-linux-gnu"


def test_a_cross_build_with_prebuilt_modules_is_refused() -> None:
    from gdrkit.packaging import build, pipeline

    source = build.Source(REPO, "0" * 40, 1)
    request = pipeline.Request(kinds=("deb", "rpm"), kernels=("6.1.0-41-arm64",), host_arch="arm64")
    with pytest.raises(UserError, match="--no-kmod"):
        pipeline.plan_request(request, source)


def test_cross_rpm_builds_target_aarch64_with_the_cross_tools() -> None:
    from gdrkit.packaging import build

    argv = build.cross_rpm_args("arm64")
    assert argv[:2] == ["--target", "aarch64-linux"]
    assert "__cc aarch64-linux-gnu-gcc" in argv and "__strip aarch64-linux-gnu-strip" in argv
    assert build.cross_rpm_args("") == []
