"""Boots bookworm's kernel for real (TCG): the command's exit status comes back.

Slow: the first run builds the bookworm root (about 1.5 min, cached), each
boot takes 10-20 s.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gdrkit import vm

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (mmdebstrap, chroot)"),
]


@pytest.fixture(scope="module")
def bookworm() -> vm.SuiteRoot:
    return vm.prepare_suite_root("bookworm")


def shm_files() -> set[str]:
    return {name for name in os.listdir("/dev/shm") if name.startswith(f"gdrkit-vram-{os.getpid()}-")}


def test_command_output_and_status(bookworm: vm.SuiteRoot, tmp_path: Path) -> None:
    before = shm_files()
    result = vm.boot(
        bookworm.kernel_image, bookworm.modules_dir, bookworm.root_dir,
        "cat /proc/version; grep -l 0x1110 /sys/bus/pci/devices/*/device; echo LD=${LD_LIBRARY_PATH-unset}",
        log_dir=tmp_path, timeout=300,
    )  # fmt: skip
    console = result.console_log.read_text(errors="replace")
    assert result.status == 0, console[-3000:]
    assert f"Linux version {bookworm.abi.removesuffix('-amd64')}" in console or bookworm.abi in console
    assert "/device" in console, "the ivshmem PCI device (1af4:1110) is visible"
    assert "LD=unset" in console
    assert result.kernel_log_findings == [], result.kernel_log_findings
    assert result.problems() == []
    assert shm_files() == before, "the ivshmem backing file is removed"


def test_failing_status_comes_back(bookworm: vm.SuiteRoot, tmp_path: Path) -> None:
    result = vm.boot(
        bookworm.kernel_image, bookworm.modules_dir, bookworm.root_dir, "exit 3", log_dir=tmp_path, timeout=300,
        ivshmem_mb=0,
    )  # fmt: skip
    assert result.status == 3
    assert result.results.get("done") == "1"


def test_timeout_kills_the_vm(bookworm: vm.SuiteRoot, tmp_path: Path) -> None:
    before = shm_files()
    result = vm.boot(
        bookworm.kernel_image, bookworm.modules_dir, bookworm.root_dir, "sleep 600", log_dir=tmp_path, timeout=25,
    )  # fmt: skip
    assert result.timed_out and result.status is None
    assert shm_files() == before


def test_a_kernel_that_dies_before_init_is_booted_twice_and_both_boots_kept(
    bookworm: vm.SuiteRoot, tmp_path: Path
) -> None:
    # No /init to run: the kernel panics before the guest reports ours_started,
    # as when TCG kills a kernel in its own boot.
    result = vm.boot(
        bookworm.kernel_image, bookworm.modules_dir, bookworm.root_dir, "true", log_dir=tmp_path, timeout=300,
        ivshmem_mb=0, extra_kernel_args=("rdinit=/nonexistent",),
    )  # fmt: skip
    assert len(result.earlier_attempts) == 1, result.attempt_lines()
    assert any("on all 2 attempts" in problem for problem in result.problems()), result.problems()
    for console in (tmp_path / "attempt-1/console.log", tmp_path / "console.log"):
        assert "Kernel panic" in console.read_text(errors="replace"), console


def test_a_crash_after_ours_started_is_never_retried(bookworm: vm.SuiteRoot, tmp_path: Path) -> None:
    result = vm.boot(
        bookworm.kernel_image, bookworm.modules_dir, bookworm.root_dir, "echo c > /proc/sysrq-trigger",
        log_dir=tmp_path, timeout=300, ivshmem_mb=0,
    )  # fmt: skip
    assert result.results.get("ours_started") == "1" and result.results.get("done") != "1", result.results
    assert result.earlier_attempts == [] and not (tmp_path / "attempt-1").exists()
    assert any("crash or panic" in problem for problem in result.problems()), result.problems()
