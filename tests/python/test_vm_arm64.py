"""arm64 for real: the project cross-built with Debian's toolchain, Debian's arm64 kernels booted
under qemu-system-aarch64 (TCG, virt machine) with softgpu over the ivshmem BAR or RAM.

CI tier (`slow`, about a minute and a half with the roots cached): trixie's 4 KiB-page
kernel, gdrcopy_sanity with the BAR-backed (write-combined) softgpu, and the library's
unit tests cross-built and run under qemu-user.  Soak tier: the 16 KiB-page kernel
(linux-image-arm64-16k), softgpu's coherent RAM mode (cached mappings, the C2C
platform), and the kernel-level tests in all four configurations on both kernels.

By hand: `./toolkit vm-test --arch arm64 --kernel trixie [--flavour arm64-16k]
[--softgpu-args force_ram=1] [--cmd gdrcopy_sanity]`.
"""

from __future__ import annotations

import re
from pathlib import Path
import pytest

from gdrkit.distro.arch import ARCHES
from gdrkit.distro.debian import SUITES
from gdrkit.system import run as run_host
from gdrkit.vm import SuiteRoot, boot, default_loads, prepare_suite_root
from gdrkit.vm.cross import cross_build, cross_unit_tests
from gdrkit.vm.kimage import image_page_size
from gdrkit.vm.suites import KernelChoice

ARM64 = ARCHES["arm64"]
SANITY_SUMMARY = re.compile(r"^Total: (\d+), Passed: (\d+), Failed: (\d+), Waived: (\d+)$", re.MULTILINE)
KTEST_SUMMARY = re.compile(r"^(\d+) passed, (\d+) failed(?:, (\d+) skipped)?$", re.MULTILINE)
UNIT_SUMMARY = re.compile(r"^(\d+) passed, (\d+) failed$", re.MULTILINE)
# The page size each flavour's kernel must run with (the image header and the guest must agree).
PAGE_SIZES = {"arm64": 4096, "arm64-16k": 16384}

_roots: dict[str, SuiteRoot] = {}


def built(flavour: str) -> SuiteRoot:
    """trixie's arm64 root of `flavour`, with the project cross-built and installed (once per session)."""
    if flavour not in _roots:
        root = prepare_suite_root("trixie", arch=ARM64, flavour=flavour)
        report = cross_build(root, KernelChoice(SUITES["trixie"], root.abi, ARM64))
        failed = {step.name: (step.reason, step.output[-3000:]) for step in report.failed}
        assert not failed, f"cross build for {root.abi}: {failed}"
        _roots[flavour] = root
    return _roots[flavour]


def run(root: SuiteRoot, command: str, softgpu_args: str = "") -> str:
    loads = default_loads(softgpu_args)
    result = boot(
        root.kernel_image,
        root.modules_dir,
        root.root_dir,
        command,
        loads=loads,
        check_refcount=True,
        arch=ARM64,
        busybox=root.busybox,
    )
    console = result.console_log.read_text(errors="replace")
    assert result.status == 0, f"{command} exited {result.status}:\n{console[-6000:]}"
    assert not result.problems(loads), f"{command}: {result.problems(loads)}\n{console[-6000:]}"
    flavour = root.abi.rsplit("+deb13-", 1)[-1]
    assert image_page_size(root.kernel_image, ARM64) == PAGE_SIZES[flavour]
    assert result.results.get("page_size") == str(PAGE_SIZES[flavour]), result.results
    print(f"{root.abi}: page size {result.results['page_size']}, {result.seconds:.1f}s in the VM")
    return console


def check_sanity(console: str, mapping_type: str) -> None:
    found = SANITY_SUMMARY.findall(console)
    assert found, console[-4000:]
    total, passed, failed, waived = (int(x) for x in found[-1])
    assert failed == 0 and total >= 36 and passed >= total - 6, f"{total=} {passed=} {failed=} {waived=}"
    assert console.count("waived: ") >= waived, console[-4000:]
    assert f"mapping type {mapping_type}" in console, console[-4000:]
    print(f"sanity: Total: {total}, Passed: {passed}, Failed: {failed}, Waived: {waived}")


# Soak, with the other arm64 boots (a minute and more of .ci/run): the arm64
# library, its copy routines and the packages are judged in .ci/run by the
# tests below, under qemu-user and by the cross builds.
@pytest.mark.soak
def test_sanity_on_the_4k_kernel_through_the_bar() -> None:
    # Write-combined MMIO mappings (GDR_MAPPING_TYPE_WC = 1) through the ivshmem BAR.
    check_sanity(run(built("arm64"), "gdrcopy_sanity -v"), "1")


@pytest.mark.slow
def test_the_library_unit_tests_pass_under_qemu_user() -> None:
    # The NEON and LDP routine sets and the generic fallback, each against plain memory.
    root = built("arm64")
    status, output = cross_unit_tests(KernelChoice(SUITES["trixie"], root.abi, ARM64))
    assert status == 0, output[-6000:]
    totals = UNIT_SUMMARY.findall(output)
    assert totals and int(totals[-1][1]) == 0, output[-4000:]
    for routine_set in ("neon", "ldp", "generic", "auto"):
        assert f"routine set {routine_set}: stores" in output, f"{routine_set} did not run:\n{output[-4000:]}"
    assert "routine set avx2: not runnable on this CPU, skipped" in output


@pytest.mark.soak
@pytest.mark.parametrize("flavour", ["arm64", "arm64-16k"])
def test_sanity_in_coherent_ram_mode(flavour: str) -> None:
    # softgpu's RAM pages, reported CPU-cacheable: gdrdrv maps them cached (type 2), as on Grace.
    check_sanity(run(built(flavour), "gdrcopy_sanity -v", "force_ram=1"), "2")


@pytest.mark.soak
def test_sanity_on_the_16k_kernel_through_the_bar() -> None:
    check_sanity(run(built("arm64-16k"), "gdrcopy_sanity -v"), "1")


@pytest.mark.soak
@pytest.mark.parametrize("flavour", ["arm64", "arm64-16k"])
def test_kernel_level_tests_in_every_configuration(flavour: str) -> None:
    # BAR and RAM softgpu, persistent and legacy pins: four runs of gdrdrv_ktest.
    console = run(built(flavour), "run_ktests.sh")
    totals = KTEST_SUMMARY.findall(console)
    assert totals, console[-4000:]
    passed, failed = int(totals[-1][0]), int(totals[-1][1])
    assert failed == 0 and passed >= 4 * 40, f"{passed=} {failed=}\n{console[-4000:]}"


def test_every_flavour_with_a_page_size_here_is_one_arm64_has() -> None:
    assert set(PAGE_SIZES) <= set(ARM64.kernel_flavours)


EM_AARCH64 = 183  # ELF e_machine of arm64


def elf_machine(data: bytes) -> int:
    assert data[:4] == b"\x7fELF", "not an ELF file"
    return int.from_bytes(data[18:20], "little")


@pytest.mark.slow
def test_arm64_deb_and_rpm_packages_cross_build_from_the_one_description(tmp_path: Path) -> None:
    # build-deb/build-rpm --arch arm64 --no-kmod: lintian/rpmlint clean, contents as packages/gdrcopy.yaml says.
    from gdrkit.packaging import pipeline

    for kinds in (("deb",), ("rpm",)):
        request = pipeline.Request(kinds=kinds, with_kmod=False, output=tmp_path / kinds[0], host_arch="arm64")
        rows = pipeline.execute(pipeline.plan_request(request))
        pipeline.check_rows(rows)
    (lib_deb,) = (tmp_path / "deb").glob("libgdrapi_*_arm64.deb")
    fields = run_host(["dpkg-deb", "--field", str(lib_deb), "Architecture", "Depends"], capture=True).stdout
    assert "Architecture: arm64" in fields and "libc6" in fields, fields
    unpacked = tmp_path / "unpacked"
    run_host(["dpkg-deb", "-x", str(lib_deb), str(unpacked)])
    (library,) = unpacked.glob("usr/lib/aarch64-linux-gnu/libgdrapi.so.2.*")
    assert elf_machine(library.read_bytes()) == EM_AARCH64
    (rpm,) = (tmp_path / "rpm").glob("gdrcopy-2*.aarch64.rpm")
    (devel,) = (tmp_path / "rpm").glob("gdrcopy-devel-*.aarch64.rpm")
    provides = run_host(["rpm", "-qp", "--provides", str(rpm)], capture=True).stdout.split("\n")
    requires = run_host(["rpm", "-qp", "--requires", str(devel)], capture=True).stdout.split("\n")
    # devel requires what the library package provides, by the target's %{_isa}.
    wanted = next(line for line in requires if line.startswith("gdrcopy("))
    assert wanted in provides and "libgdrapi.so.2()(64bit)" in provides, (requires, provides)
